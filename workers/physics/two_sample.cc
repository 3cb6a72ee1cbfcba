// The classifier is a small multilayer perceptron written out with Eigen (forward, backward and
// Adam by hand): physics/ stays free of LibTorch, so gantry-validate and the tests build without
// it, and the run is deterministic for a seed on any machine.
#include "workers/physics/two_sample.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "Eigen/Core"
#include "Eigen/Eigenvalues"
#include "absl/strings/str_cat.h"
#include "base/random_bits.h"

namespace gantry::physics {
namespace {

using Matrix = Eigen::MatrixXf;  // column-major: one event per column
using Vector = Eigen::VectorXf;

constexpr float kLeakySlope = 0.2f;
constexpr int64_t kMinEvents = 10;
// Standardised inputs are clipped to +-100 standard deviations: an outlier must not overflow the
// network's activations.
constexpr float kClip = 100.0f;

// splitmix64 (base/random_bits.h): the classifier's only source of randomness, identical on every
// platform.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  uint64_t Next() { return random_bits::SplitMix64(state_); }
  double Uniform() { return random_bits::UnitInterval(Next()); }
  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[Next() % i]);
  }

 private:
  uint64_t state_;
};

absl::Status CheckSamples(const Sample& a, const Sample& b, int64_t min_events) {
  if (a.inputs != b.inputs || a.inputs < 1) {
    return absl::InvalidArgumentError(absl::StrCat("the samples have ", a.inputs, " and ",
                                                   b.inputs, " inputs per event; they must match"));
  }
  for (const Sample* s : {&a, &b}) {
    if (s->events < min_events) {
      return absl::InvalidArgumentError(
          absl::StrCat("a sample has ", s->events, " events; the test needs at least ", min_events));
    }
    if (static_cast<int64_t>(s->values.size()) != s->events * s->inputs) {
      return absl::InvalidArgumentError("a sample's value count does not match events x inputs");
    }
    for (float v : s->values) {
      if (!std::isfinite(v)) return absl::InvalidArgumentError("a sample has a non-finite input");
    }
  }
  return absl::OkStatus();
}

// One dense layer's parameters with their Adam moments.
struct Dense {
  Matrix w, mw, vw;
  Vector b, mb, vb;
  Dense(int out, int in, float bound, Random& rng)
      : w(out, in), mw(Matrix::Zero(out, in)), vw(Matrix::Zero(out, in)), b(Vector::Zero(out)),
        mb(Vector::Zero(out)), vb(Vector::Zero(out)) {
    for (int j = 0; j < in; ++j) {
      for (int i = 0; i < out; ++i) w(i, j) = static_cast<float>((2 * rng.Uniform() - 1) * bound);
    }
  }
};

struct Mlp {
  std::vector<Dense> layers;
  int64_t adam_steps = 0;
};

Mlp MakeMlp(int inputs, int hidden, Random& rng) {
  Mlp m;
  // He-uniform bounds for the leaky-ReLU layers, Glorot-uniform for the output.
  m.layers.emplace_back(hidden, inputs, static_cast<float>(std::sqrt(6.0 / inputs)), rng);
  m.layers.emplace_back(hidden, hidden, static_cast<float>(std::sqrt(6.0 / hidden)), rng);
  m.layers.emplace_back(1, hidden, static_cast<float>(std::sqrt(6.0 / (hidden + 1))), rng);
  return m;
}

Matrix LeakyRelu(const Matrix& z) {
  return z.unaryExpr([](float v) { return v > 0 ? v : kLeakySlope * v; });
}
Matrix LeakyReluGrad(const Matrix& z) {
  return z.unaryExpr([](float v) { return v > 0 ? 1.0f : kLeakySlope; });
}

// The logits of a batch (inputs x events), keeping the pre-activations for the backward pass.
Eigen::RowVectorXf Forward(const Mlp& m, const Matrix& x, std::vector<Matrix>* pre = nullptr,
                           std::vector<Matrix>* act = nullptr) {
  Matrix a = x;
  for (size_t l = 0; l < m.layers.size(); ++l) {
    Matrix z = m.layers[l].w * a;
    z.colwise() += m.layers[l].b;
    if (l + 1 == m.layers.size()) return z.row(0);
    if (pre != nullptr) pre->push_back(z);
    if (act != nullptr) act->push_back(a);
    a = LeakyRelu(z);
  }
  return {};
}

// Mean binary cross-entropy of logits against labels, in the overflow-free form
// max(z, 0) - y z + log(1 + exp(-|z|)).
double Bce(const Eigen::RowVectorXf& logits, const std::vector<float>& y) {
  double s = 0;
  for (Eigen::Index i = 0; i < logits.size(); ++i) {
    const double z = logits[i];
    s += std::max(z, 0.0) - y[i] * z + std::log1p(std::exp(-std::fabs(z)));
  }
  return logits.size() > 0 ? s / logits.size() : 0.0;
}

void AdamUpdate(Matrix& p, Matrix& m, Matrix& v, const Matrix& g, double lr, int64_t t) {
  constexpr float kB1 = 0.9f, kB2 = 0.999f, kEps = 1e-8f;
  m = kB1 * m + (1 - kB1) * g;
  v = kB2 * v + (1 - kB2) * g.cwiseProduct(g);
  const float c1 = static_cast<float>(1 - std::pow(kB1, t)), c2 = static_cast<float>(1 - std::pow(kB2, t));
  const float step = static_cast<float>(lr);
  p.array() -= step * (m.array() / c1) / ((v.array() / c2).sqrt() + kEps);
}

void AdamUpdate(Vector& p, Vector& m, Vector& v, const Vector& g, double lr, int64_t t) {
  Matrix pm = p, mm = m, vm = v;
  AdamUpdate(pm, mm, vm, Matrix(g), lr, t);
  p = pm;
  m = mm;
  v = vm;
}

// One Adam step on a batch: x inputs x B, y the labels.
void TrainStep(Mlp& m, const Matrix& x, const std::vector<float>& y, double lr) {
  std::vector<Matrix> pre, act;
  const Eigen::RowVectorXf logits = Forward(m, x, &pre, &act);
  const auto batch = static_cast<float>(logits.size());
  Matrix delta(1, logits.size());
  for (Eigen::Index i = 0; i < logits.size(); ++i) {
    delta(0, i) = (1.0f / (1.0f + std::exp(-logits[i])) - y[i]) / batch;
  }
  ++m.adam_steps;
  // The output layer's input is the last hidden activation.
  Matrix input = LeakyRelu(pre.back());
  for (int l = static_cast<int>(m.layers.size()) - 1; l >= 0; --l) {
    Dense& d = m.layers[l];
    const Matrix gw = delta * input.transpose();
    const Vector gb = delta.rowwise().sum();
    Matrix next_delta;
    if (l > 0) next_delta = (d.w.transpose() * delta).cwiseProduct(LeakyReluGrad(pre[l - 1]));
    AdamUpdate(d.w, d.mw, d.vw, gw, lr, m.adam_steps);
    AdamUpdate(d.b, d.mb, d.vb, gb, lr, m.adam_steps);
    if (l > 0) {
      delta = std::move(next_delta);
      input = l >= 2 ? LeakyRelu(pre[l - 2]) : act[0];
    }
  }
}

// Inputs standardised by the training part's mean and scale (1 / standard deviation), applied
// per batch so that no standardised copy of the whole sample is held.
struct Standardised {
  const Matrix& x;
  Vector mean, scale;
};

Matrix Gather(const Standardised& s, const std::vector<int64_t>& columns, size_t begin, size_t end) {
  Matrix out(s.x.rows(), static_cast<Eigen::Index>(end - begin));
  for (size_t i = begin; i < end; ++i) {
    out.col(static_cast<Eigen::Index>(i - begin)) =
        (s.x.col(columns[i]) - s.mean).cwiseProduct(s.scale).cwiseMax(-kClip).cwiseMin(kClip);
  }
  return out;
}

Eigen::RowVectorXf Predict(const Mlp& m, const Standardised& x, const std::vector<int64_t>& columns) {
  constexpr size_t kChunk = 512;
  Eigen::RowVectorXf out(static_cast<Eigen::Index>(columns.size()));
  for (size_t begin = 0; begin < columns.size(); begin += kChunk) {
    const size_t end = std::min(columns.size(), begin + kChunk);
    out.segment(static_cast<Eigen::Index>(begin), static_cast<Eigen::Index>(end - begin)) =
        Forward(m, Gather(x, columns, begin, end));
  }
  return out;
}

// One seed of the test: the AUC and the best epoch.
std::pair<double, int> RunSeed(const Matrix& x, const std::vector<float>& labels, int64_t first_events,
                               const ClassifierOptions& o, uint64_t seed) {
  Random rng(seed);
  // Stratified 60/20/20 split.
  std::vector<int64_t> train, valid, test;
  const int64_t total = x.cols();
  for (int cls = 0; cls < 2; ++cls) {
    std::vector<int64_t> idx;
    for (int64_t i = cls == 0 ? 0 : first_events; i < (cls == 0 ? first_events : total); ++i) {
      idx.push_back(i);
    }
    rng.Shuffle(idx);
    const size_t n_train = idx.size() * 6 / 10, n_valid = idx.size() * 2 / 10;
    train.insert(train.end(), idx.begin(), idx.begin() + n_train);
    valid.insert(valid.end(), idx.begin() + n_train, idx.begin() + n_train + n_valid);
    test.insert(test.end(), idx.begin() + n_train + n_valid, idx.end());
  }
  // Standardisation by the training part.
  Eigen::VectorXd sum = Eigen::VectorXd::Zero(x.rows()), sq = Eigen::VectorXd::Zero(x.rows());
  for (int64_t i : train) {
    const Eigen::VectorXd c = x.col(i).cast<double>();
    sum += c;
    sq += c.cwiseProduct(c);
  }
  const double n_train = static_cast<double>(train.size());
  const Eigen::VectorXd mean = sum / n_train;
  Eigen::VectorXd var = sq / n_train - mean.cwiseProduct(mean);
  if (!o.scale_per_input) var.setConstant(var.mean());
  Vector scale =
      var.unaryExpr([](double v) { return v > 1e-12 ? 1.0 / std::sqrt(v) : 1.0; }).cast<float>();
  const Standardised xs{x, mean.cast<float>(), std::move(scale)};

  auto labels_of = [&](const std::vector<int64_t>& ids, size_t begin, size_t end) {
    std::vector<float> y;
    for (size_t i = begin; i < end; ++i) y.push_back(labels[ids[i]]);
    return y;
  };
  const std::vector<float> y_valid = labels_of(valid, 0, valid.size());

  Mlp mlp = MakeMlp(static_cast<int>(x.rows()), o.hidden, rng);
  Mlp best = mlp;
  double best_loss = Bce(Predict(mlp, xs, valid), y_valid);
  int best_epoch = 0, since_best = 0;
  for (int epoch = 1; epoch <= o.max_epochs && since_best < o.patience; ++epoch) {
    rng.Shuffle(train);
    for (size_t begin = 0; begin < train.size(); begin += o.batch) {
      const size_t end = std::min(train.size(), begin + static_cast<size_t>(o.batch));
      TrainStep(mlp, Gather(xs, train, begin, end), labels_of(train, begin, end), o.learning_rate);
    }
    const double loss = Bce(Predict(mlp, xs, valid), y_valid);
    if (loss < best_loss) {
      best_loss = loss;
      best = mlp;
      best_epoch = epoch;
      since_best = 0;
    } else {
      ++since_best;
    }
  }
  auto scores = [&](const std::vector<int64_t>& ids) {
    const Eigen::RowVectorXf s = Predict(best, xs, ids);
    std::vector<double> out(s.data(), s.data() + s.size());
    for (double& v : out) {
      if (std::isnan(v)) v = 0;  // ranks and calibration need an order
    }
    return out;
  };
  auto bool_labels = [&](const std::vector<int64_t>& ids) {
    std::vector<bool> y;
    for (int64_t i : ids) y.push_back(labels[i] > 0.5f);
    return y;
  };
  const IsotonicCalibration calibration = FitIsotonic(scores(valid), bool_labels(valid));
  std::vector<double> test_scores = scores(test);
  for (double& s : test_scores) s = ApplyCalibration(calibration, s);
  return {RocAuc(test_scores, bool_labels(test)), best_epoch};
}

Matrix Columns(const Sample& s) {
  return Eigen::Map<const Matrix>(s.values.data(), s.inputs, s.events);
}

// Both samples as inputs x events in double, standardised by the mean and standard deviation of
// the first (inputs constant in it keep scale 1).
std::pair<Eigen::MatrixXd, Eigen::MatrixXd> StandardisedByFirst(const Sample& first,
                                                                const Sample& second) {
  const Eigen::MatrixXd a = Columns(first).cast<double>(), b = Columns(second).cast<double>();
  const Eigen::VectorXd mean = a.rowwise().mean();
  const Eigen::VectorXd sd =
      ((a.colwise() - mean).array().square().rowwise().sum() / static_cast<double>(a.cols() - 1))
          .sqrt()
          .matrix();
  const Eigen::VectorXd scale = sd.unaryExpr([](double v) { return v > 1e-12 ? 1.0 / v : 1.0; });
  auto standardised = [&](const Eigen::MatrixXd& m) -> Eigen::MatrixXd {
    return (m.colwise() - mean).array().colwise() * scale.array();
  };
  return {standardised(a), standardised(b)};
}

// The Frechet distance between Gaussians fitted to two samples (inputs x events).
double GaussianFrechet(const Eigen::MatrixXd& a, const Eigen::MatrixXd& b) {
  const Eigen::VectorXd mu_a = a.rowwise().mean(), mu_b = b.rowwise().mean();
  auto covariance = [](const Eigen::MatrixXd& m, const Eigen::VectorXd& mu) -> Eigen::MatrixXd {
    const Eigen::MatrixXd c = m.colwise() - mu;
    return c * c.transpose() / static_cast<double>(m.cols() - 1);
  };
  const Eigen::MatrixXd cov_a = covariance(a, mu_a), cov_b = covariance(b, mu_b);
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig_a(cov_a);
  const Eigen::VectorXd root = eig_a.eigenvalues().cwiseMax(0.0).cwiseSqrt();
  const Eigen::MatrixXd sqrt_a =
      eig_a.eigenvectors() * root.asDiagonal() * eig_a.eigenvectors().transpose();
  const Eigen::MatrixXd inner = sqrt_a * cov_b * sqrt_a;
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig_inner((inner + inner.transpose()) / 2);
  const double trace_sqrt = eig_inner.eigenvalues().cwiseMax(0.0).cwiseSqrt().sum();
  return std::max(0.0, (mu_a - mu_b).squaredNorm() + cov_a.trace() + cov_b.trace() - 2 * trace_sqrt);
}

}  // namespace

double RocAuc(const std::vector<double>& scores, const std::vector<bool>& labels) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  double rank_sum = 0, positives = 0;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && scores[order[j]] == scores[order[i]]) ++j;
    const double mean_rank = 0.5 * static_cast<double>(i + 1 + j);  // ranks i+1 .. j
    for (size_t k = i; k < j; ++k) {
      if (labels[order[k]]) {
        rank_sum += mean_rank;
        positives += 1;
      }
    }
    i = j;
  }
  const double negatives = static_cast<double>(scores.size()) - positives;
  if (positives == 0 || negatives == 0) return 0.5;
  return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives);
}

IsotonicCalibration FitIsotonic(const std::vector<double>& scores, const std::vector<bool>& labels) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  struct Block {
    double sum, count, upper;
  };
  std::vector<Block> blocks;
  for (size_t i : order) {
    blocks.push_back({labels[i] ? 1.0 : 0.0, 1.0, scores[i]});
    // Equal scores share a block; a block whose mean is not above its predecessor's is merged.
    while (blocks.size() > 1) {
      Block& prev = blocks[blocks.size() - 2];
      const Block& last = blocks.back();
      if (prev.upper != last.upper && prev.sum * last.count < last.sum * prev.count) break;
      prev.sum += last.sum;
      prev.count += last.count;
      prev.upper = last.upper;
      blocks.pop_back();
    }
  }
  IsotonicCalibration c;
  for (const Block& b : blocks) {
    c.upper_score.push_back(b.upper);
    c.value.push_back(b.sum / b.count);
  }
  return c;
}

double ApplyCalibration(const IsotonicCalibration& c, double score) {
  if (c.value.empty()) return 0.5;
  const auto it = std::lower_bound(c.upper_score.begin(), c.upper_score.end(), score);
  return it == c.upper_score.end() ? c.value.back() : c.value[it - c.upper_score.begin()];
}

absl::StatusOr<ClassifierResult> ClassifierTwoSampleTest(const Sample& first, const Sample& second,
                                                         const ClassifierOptions& options) {
  if (absl::Status s = CheckSamples(first, second, kMinEvents); !s.ok()) return s;
  if (options.seeds < 1 || options.hidden < 1 || options.batch < 1 || options.max_epochs < 1 ||
      options.patience < 1 || !(options.learning_rate > 0)) {
    return absl::InvalidArgumentError(
        "classifier options: seeds, hidden, batch, max_epochs and patience must be >= 1 and the "
        "learning rate positive");
  }
  Matrix x(first.inputs, first.events + second.events);
  x << Columns(first), Columns(second);
  std::vector<float> labels(static_cast<size_t>(x.cols()), 0.0f);
  std::fill(labels.begin() + first.events, labels.end(), 1.0f);

  ClassifierResult result;
  double epochs = 0;
  for (int s = 0; s < options.seeds; ++s) {
    const auto [auc, epoch] =
        RunSeed(x, labels, first.events, options, options.seed * 1000003ULL + static_cast<uint64_t>(s));
    result.per_seed.push_back(auc);
    epochs += epoch;
  }
  const double n = static_cast<double>(options.seeds);
  result.auc = std::accumulate(result.per_seed.begin(), result.per_seed.end(), 0.0) / n;
  double var = 0;
  for (double a : result.per_seed) var += (a - result.auc) * (a - result.auc);
  result.spread = options.seeds > 1 ? std::sqrt(var / (n - 1)) : 0.0;
  result.best_epoch = epochs / n;
  return result;
}

absl::StatusOr<double> FrechetDistance(const Sample& first, const Sample& second) {
  if (absl::Status s = CheckSamples(first, second, 2); !s.ok()) return s;
  const auto [a, b] = StandardisedByFirst(first, second);
  return GaussianFrechet(a, b);
}

absl::StatusOr<double> FrechetDistanceAtInfinity(const Sample& first, const Sample& second,
                                                 uint64_t seed) {
  constexpr int kSizes = 5, kDraws = 4;
  if (absl::Status s = CheckSamples(first, second, 2 * kSizes); !s.ok()) return s;
  const auto [a, b] = StandardisedByFirst(first, second);
  const int64_t n = std::min(a.cols(), b.cols());
  Random rng(seed);
  std::vector<int64_t> ia(static_cast<size_t>(a.cols())), ib(static_cast<size_t>(b.cols()));
  std::iota(ia.begin(), ia.end(), 0);
  std::iota(ib.begin(), ib.end(), 0);
  // Least squares of FD against 1/N over subsets of N = n/2 .. n events (kDraws each).
  double sx = 0, sy = 0, sxx = 0, sxy = 0, points = 0;
  for (int k = 0; k < kSizes; ++k) {
    const int64_t size = n / 2 + (n - n / 2) * k / (kSizes - 1);
    for (int d = 0; d < kDraws; ++d) {
      rng.Shuffle(ia);
      rng.Shuffle(ib);
      Eigen::MatrixXd sa(a.rows(), size), sb(b.rows(), size);
      for (int64_t i = 0; i < size; ++i) {
        sa.col(i) = a.col(ia[i]);
        sb.col(i) = b.col(ib[i]);
      }
      const double x = 1.0 / static_cast<double>(size), y = GaussianFrechet(sa, sb);
      sx += x;
      sy += y;
      sxx += x * x;
      sxy += x * y;
      points += 1;
    }
  }
  const double slope = (points * sxy - sx * sy) / (points * sxx - sx * sx);
  return std::max(0.0, (sy - slope * sx) / points);
}

}  // namespace gantry::physics
