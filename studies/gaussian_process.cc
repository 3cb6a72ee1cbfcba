#include "studies/gaussian_process.h"

#include <nlopt.h>

#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gantry::studies {
namespace {

constexpr double kSqrt5 = 2.23606797749978969640;
// Bounds of the hyper-parameters (cube units, standardised targets). Length scales above ~10
// make a coordinate irrelevant; a noise floor keeps the Cholesky stable.
constexpr double kMinLengthScale = 0.01, kMaxLengthScale = 20.0;
constexpr double kMinSignalVariance = 0.01, kMaxSignalVariance = 100.0;
constexpr double kMinNoiseVariance = 1e-6, kMaxNoiseVariance = 1.0;
constexpr double kJitter = 1e-9;
constexpr int kMaxEvaluationsPerStart = 80;

// k(r) / signal variance for the Matern 5/2 kernel.
double Matern52(double r) { return (1.0 + kSqrt5 * r + 5.0 / 3.0 * r * r) * std::exp(-kSqrt5 * r); }

// What the likelihood optimiser sees: the data, targets standardised.
struct FitProblem {
  const Eigen::MatrixXd* inputs;
  const Eigen::VectorXd* targets;  // standardised
  const Eigen::VectorXd* extra_noise;
};

// The kernel matrix K: signal_variance * Matern52(r) with r the distance scaled by the length
// scales, plus on the diagonal the noise variance, each observation's extra noise and a jitter.
// The distances r go to `distances` when it is given (the gradient needs them).
Eigen::MatrixXd Covariance(const Eigen::MatrixXd& inputs, const Eigen::VectorXd& extra_noise,
                           const Eigen::VectorXd& length_scales, double signal_variance,
                           double noise_variance, Eigen::MatrixXd* distances) {
  const int n = static_cast<int>(inputs.rows());
  const Eigen::MatrixXd scaled = inputs.array().rowwise() / length_scales.transpose().array();
  Eigen::MatrixXd covariance(n, n);
  if (distances != nullptr) distances->resize(n, n);
  for (int i = 0; i < n; ++i) {
    covariance(i, i) = signal_variance + noise_variance + extra_noise[i] + kJitter;
    if (distances != nullptr) (*distances)(i, i) = 0;
    for (int j = 0; j < i; ++j) {
      const double r = (scaled.row(i) - scaled.row(j)).norm();
      covariance(i, j) = covariance(j, i) = signal_variance * Matern52(r);
      if (distances != nullptr) (*distances)(i, j) = (*distances)(j, i) = r;
    }
  }
  return covariance;
}

// NLopt's objective: the log marginal likelihood at theta = [log l_1..log l_d, log signal
// variance, log noise variance] and its gradient (when asked); -1e300 when K is not positive
// definite, so the optimiser backs off.
double LogMarginalLikelihood(unsigned size, const double* theta, double* gradient, void* data) {
  const FitProblem& problem = *static_cast<const FitProblem*>(data);
  const Eigen::MatrixXd& inputs = *problem.inputs;
  const Eigen::VectorXd& y = *problem.targets;
  const int n = static_cast<int>(inputs.rows());
  const int dimensions = static_cast<int>(inputs.cols());
  Eigen::VectorXd length_scales(dimensions);
  for (int d = 0; d < dimensions; ++d) length_scales[d] = std::exp(theta[d]);
  const double signal_variance = std::exp(theta[dimensions]);
  const double noise_variance = std::exp(theta[dimensions + 1]);

  Eigen::MatrixXd distances;
  const Eigen::MatrixXd covariance = Covariance(inputs, *problem.extra_noise, length_scales,
                                                signal_variance, noise_variance, &distances);
  const Eigen::LLT<Eigen::MatrixXd> cholesky(covariance);
  if (cholesky.info() != Eigen::Success) {
    if (gradient != nullptr) std::fill(gradient, gradient + size, 0.0);
    return -1e300;
  }
  const Eigen::VectorXd alpha = cholesky.solve(y);
  const Eigen::MatrixXd& lower = cholesky.matrixLLT();
  double log_determinant_half = 0;
  for (int i = 0; i < n; ++i) log_determinant_half += std::log(lower(i, i));
  const double value = -0.5 * y.dot(alpha) - log_determinant_half - 0.5 * n * std::log(2 * M_PI);
  if (gradient == nullptr) return value;

  // d/dtheta = 0.5 tr(W dK/dtheta) with W = alpha alpha^T - K^-1.
  Eigen::MatrixXd w = cholesky.solve(Eigen::MatrixXd::Identity(n, n));
  w = alpha * alpha.transpose() - w;
  std::fill(gradient, gradient + size, 0.0);
  double signal_gradient = 0;
  for (int i = 0; i < n; ++i) {
    signal_gradient += 0.5 * w(i, i) * signal_variance;
    for (int j = 0; j < i; ++j) {
      const double r = distances(i, j);
      const double e = std::exp(-kSqrt5 * r);
      signal_gradient += w(i, j) * signal_variance * (1.0 + kSqrt5 * r + 5.0 / 3.0 * r * r) * e;
      // dk/dlog l_d = s2 (5/3) (1 + sqrt5 r) exp(-sqrt5 r) (x_id - x_jd)^2 / l_d^2; the pair
      // (i, j) and (j, i) together cancel the 0.5.
      const double common = w(i, j) * signal_variance * 5.0 / 3.0 * (1.0 + kSqrt5 * r) * e;
      for (int d = 0; d < dimensions; ++d) {
        const double delta = (inputs(i, d) - inputs(j, d)) / length_scales[d];
        gradient[d] += common * delta * delta;
      }
    }
  }
  gradient[dimensions] = signal_gradient;
  gradient[dimensions + 1] = 0.5 * w.diagonal().sum() * noise_variance;
  return value;
}

}  // namespace

absl::StatusOr<GaussianProcess> GaussianProcess::Fit(const Eigen::MatrixXd& inputs,
                                                     const Eigen::VectorXd& targets,
                                                     const Eigen::VectorXd& extra_noise,
                                                     int restarts, RandomSource& random) {
  const int n = static_cast<int>(inputs.rows());
  const int dimensions = static_cast<int>(inputs.cols());
  if (n < 2 || targets.size() != n || extra_noise.size() != n || dimensions < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("a Gaussian process needs at least two observations with one target and "
                     "one noise each (got ",
                     n, " inputs, ", targets.size(), " targets, ", extra_noise.size(), " noises)"));
  }
  GaussianProcess process;
  process.target_mean_ = targets.mean();
  const double variance = (targets.array() - process.target_mean_).square().mean();
  process.target_scale_ = variance > 1e-24 ? std::sqrt(variance) : 1.0;
  const Eigen::VectorXd standardised =
      (targets.array() - process.target_mean_) / process.target_scale_;
  const Eigen::VectorXd standardised_noise =
      extra_noise / (process.target_scale_ * process.target_scale_);

  const int size = dimensions + 2;
  std::vector<double> lower(size), upper(size);
  for (int d = 0; d < dimensions; ++d) {
    lower[d] = std::log(kMinLengthScale);
    upper[d] = std::log(kMaxLengthScale);
  }
  lower[dimensions] = std::log(kMinSignalVariance);
  upper[dimensions] = std::log(kMaxSignalVariance);
  lower[dimensions + 1] = std::log(kMinNoiseVariance);
  upper[dimensions + 1] = std::log(kMaxNoiseVariance);

  FitProblem problem{&inputs, &standardised, &standardised_noise};
  nlopt_opt optimizer = nlopt_create(NLOPT_LD_LBFGS, size);
  nlopt_set_lower_bounds(optimizer, lower.data());
  nlopt_set_upper_bounds(optimizer, upper.data());
  nlopt_set_max_objective(optimizer, LogMarginalLikelihood, &problem);
  nlopt_set_maxeval(optimizer, kMaxEvaluationsPerStart);
  nlopt_set_ftol_rel(optimizer, 1e-7);

  std::vector<double> best;
  double best_value = -std::numeric_limits<double>::infinity();
  for (int start = 0; start < restarts; ++start) {
    std::vector<double> theta(size);
    if (start == 0) {
      for (int d = 0; d < dimensions; ++d) theta[d] = std::log(0.3);
      theta[dimensions] = 0.0;
      theta[dimensions + 1] = std::log(1e-3);
    } else {
      for (int i = 0; i < size; ++i) {
        theta[i] = lower[i] + random.Uniform() * (upper[i] - lower[i]);
      }
    }
    double value = -std::numeric_limits<double>::infinity();
    // A failed or stopped run keeps the best point it reached, which is what is wanted here.
    nlopt_optimize(optimizer, theta.data(), &value);
    if (std::isfinite(value) && value > -1e299 && value > best_value) {
      best_value = value;
      best = theta;
    }
  }
  nlopt_destroy(optimizer);
  if (best.empty()) {
    return absl::InternalError(
        "the Gaussian process' kernel matrix was not positive definite at any start");
  }
  process.length_scales_.resize(dimensions);
  for (int d = 0; d < dimensions; ++d) process.length_scales_[d] = std::exp(best[d]);
  process.signal_variance_ = std::exp(best[dimensions]);
  process.noise_variance_ = std::exp(best[dimensions + 1]);
  process.log_marginal_likelihood_ = best_value;
  if (absl::Status status = process.Condition(inputs, targets, extra_noise); !status.ok()) {
    return status;
  }
  return process;
}

absl::Status GaussianProcess::Condition(const Eigen::MatrixXd& inputs,
                                        const Eigen::VectorXd& targets,
                                        const Eigen::VectorXd& extra_noise) {
  const double scale2 = target_scale_ * target_scale_;
  const Eigen::MatrixXd covariance = Covariance(inputs, extra_noise / scale2, length_scales_,
                                                signal_variance_, noise_variance_, nullptr);
  cholesky_.compute(covariance);
  if (cholesky_.info() != Eigen::Success) {
    return absl::InternalError("the Gaussian process' kernel matrix is not positive definite");
  }
  inputs_ = inputs;
  alpha_ = cholesky_.solve(((targets.array() - target_mean_) / target_scale_).matrix());
  return absl::OkStatus();
}

GaussianProcess::Prediction GaussianProcess::Predict(const Eigen::VectorXd& point) const {
  const int n = static_cast<int>(inputs_.rows());
  Eigen::VectorXd cross(n);
  const Eigen::ArrayXd inverse_scales = length_scales_.array().inverse();
  for (int i = 0; i < n; ++i) {
    const double r =
        ((inputs_.row(i).transpose() - point).array() * inverse_scales).matrix().norm();
    cross[i] = signal_variance_ * Matern52(r);
  }
  const Eigen::VectorXd v = cholesky_.matrixL().solve(cross);
  const double variance = std::max(signal_variance_ - v.squaredNorm(), 1e-12);
  return Prediction{target_mean_ + target_scale_ * cross.dot(alpha_),
                    target_scale_ * std::sqrt(variance)};
}

}  // namespace gantry::studies
