// A GaussianProcess is a regression model of the objective over the unit cube: zero mean on
// standardised targets, a Matern 5/2 kernel with one length scale per coordinate (ARD), a signal
// variance and a noise variance, fitted by maximising the log marginal likelihood (NLopt's
// L-BFGS, multi-start, bounded) and solved by Cholesky (Eigen).
#ifndef GANTRY_STUDIES_GAUSSIAN_PROCESS_H_
#define GANTRY_STUDIES_GAUSSIAN_PROCESS_H_

#include "Eigen/Cholesky"
#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "studies/random_source.h"

namespace gantry::studies {

class GaussianProcess {
 public:
  // The posterior at one point, in the targets' units.
  struct Prediction {
    double mean = 0;
    double stddev = 0;  // of the latent function (noise excluded)
  };

  // Fits the hyper-parameters to `inputs` (one row per observation, coordinates in [0, 1]) and
  // finite `targets`. `extra_noise` holds each observation's known noise variance in the
  // targets' units (0 when unknown), added to the fitted noise. `restarts` >= 1 starts of the
  // optimiser: the first from a default, the others drawn from `random`. INVALID_ARGUMENT for
  // fewer than two observations or mismatched sizes; INTERNAL when no start gives a positive
  // definite kernel matrix.
  static absl::StatusOr<GaussianProcess> Fit(const Eigen::MatrixXd& inputs,
                                             const Eigen::VectorXd& targets,
                                             const Eigen::VectorXd& extra_noise, int restarts,
                                             RandomSource& random);

  // The same hyper-parameters and target scaling, conditioned on other data (the constant liar
  // adds pending points with an assumed value this way). INTERNAL if the Cholesky fails.
  absl::Status Condition(const Eigen::MatrixXd& inputs, const Eigen::VectorXd& targets,
                         const Eigen::VectorXd& extra_noise);

  Prediction Predict(const Eigen::VectorXd& point) const;

  // The fitted hyper-parameters (length scales in cube units; variances of the standardised
  // targets) and the log marginal likelihood they reach.
  const Eigen::VectorXd& length_scales() const { return length_scales_; }
  double signal_variance() const { return signal_variance_; }
  double noise_variance() const { return noise_variance_; }
  double log_marginal_likelihood() const { return log_marginal_likelihood_; }

 private:
  GaussianProcess() = default;

  Eigen::VectorXd length_scales_;
  double signal_variance_ = 1;
  double noise_variance_ = 1e-3;
  double log_marginal_likelihood_ = 0;
  double target_mean_ = 0;
  double target_scale_ = 1;
  Eigen::MatrixXd inputs_;
  Eigen::LLT<Eigen::MatrixXd> cholesky_;
  Eigen::VectorXd alpha_;  // K^-1 (standardised targets)
};

}  // namespace gantry::studies

#endif  // GANTRY_STUDIES_GAUSSIAN_PROCESS_H_
