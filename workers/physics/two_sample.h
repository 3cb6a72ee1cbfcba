// Two-sample tests on per-event feature vectors, as the field scores a generator (CaloChallenge
// 2022, reference section G): a classifier trained to tell the samples apart (its AUC), and the
// Frechet distance between Gaussians fitted to the features. Pure C++ (Eigen), deterministic for
// a seed, single-threaded.
#ifndef GANTRY_WORKERS_PHYSICS_TWO_SAMPLE_H_
#define GANTRY_WORKERS_PHYSICS_TWO_SAMPLE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace gantry::physics {

// Row-major events x inputs.
struct Sample {
  int64_t events = 0;
  int64_t inputs = 0;
  std::vector<float> values;
};

struct ClassifierOptions {
  // Classifier seeds: each draws its own split, initial weights and batches. The AUC is their
  // mean; its spread their standard deviation.
  int seeds = 3;
  uint64_t seed = 1;
  // A multilayer perceptron inputs -> hidden -> hidden -> 1, leaky ReLU (0.2), sigmoid output,
  // binary cross-entropy, Adam (lr, 0.9, 0.999).
  int hidden = 64;
  double learning_rate = 1e-3;
  int batch = 128;
  // Trained up to max_epochs, stopped after `patience` epochs without a better validation loss;
  // the best epoch's weights are kept.
  int max_epochs = 60;
  int patience = 8;
  // Inputs are centred by their training-part means, then divided by their own standard deviation
  // (true) or by one pooled over all inputs (false: for cells, where a cell that is nearly always
  // empty would otherwise turn a rare deposit into an input of hundreds of standard deviations).
  bool scale_per_input = true;
};

struct ClassifierResult {
  double auc = 0.5;      // mean over seeds of the test AUC of the calibrated classifier
  double spread = 0;     // standard deviation over seeds (0 for one seed)
  std::vector<double> per_seed;
  double best_epoch = 0;  // mean over seeds (1-based)
};

// The classifier two-sample test: labels `first` 0 and `second` 1, splits each class 60/20/20
// into train, validation and test (stratified), standardises the inputs by the training part,
// trains the MLP on train, keeps the epoch with the lowest validation loss, calibrates its output
// by isotonic regression on the validation part, and scores the calibrated test predictions by
// their ROC AUC (ties counted half). 0.5 means the classifier cannot tell the samples apart; 1.0
// that it separates them completely. INVALID_ARGUMENT when the input counts differ, a sample has
// fewer than 10 events, an input is not finite, or the options are out of range.
absl::StatusOr<ClassifierResult> ClassifierTwoSampleTest(const Sample& first, const Sample& second,
                                                         const ClassifierOptions& options);

// ROC AUC of scores with labels (true = positive): the probability that a random positive scores
// above a random negative, ties counted half (Mann-Whitney U / (n_pos n_neg)). 0.5 when a class is
// empty.
double RocAuc(const std::vector<double>& scores, const std::vector<bool>& labels);

// Isotonic (non-decreasing) least-squares fit of labels against scores, by pool-adjacent
// violators; returns the calibration as breakpoints: the sorted scores' block upper ends and the
// fitted values. ApplyCalibration maps a score to the value of the block it falls in (clamped).
struct IsotonicCalibration {
  std::vector<double> upper_score;
  std::vector<double> value;
};
IsotonicCalibration FitIsotonic(const std::vector<double>& scores, const std::vector<bool>& labels);
double ApplyCalibration(const IsotonicCalibration& c, double score);

// The Frechet distance |mu_a - mu_b|^2 + tr(S_a + S_b - 2 (S_a^1/2 S_b S_a^1/2)^1/2) between
// Gaussians fitted to two samples, after standardising every input by the mean and standard
// deviation of `first` (inputs constant in `first` are scaled by 1), so the distance does not
// depend on the features' units. 0 for identical samples. INVALID_ARGUMENT when the input counts
// differ or a sample has fewer than 2 events.
absl::StatusOr<double> FrechetDistance(const Sample& first, const Sample& second);

// The Frechet distance extrapolated to infinite samples, as the field reports it (FPD, Kansal et
// al. 2023): the estimate above is biased upwards by about (inputs^2 / events) for finite samples,
// so it is computed on random subsets of N = n/2 .. n events (5 sizes, 4 draws each; n the
// smaller sample), fitted linearly in 1/N, and the intercept returned (0 where it is negative,
// as it can be for samples of one distribution). INVALID_ARGUMENT as FrechetDistance, or fewer than 10 events.
absl::StatusOr<double> FrechetDistanceAtInfinity(const Sample& first, const Sample& second,
                                                 uint64_t seed);

}  // namespace gantry::physics

#endif  // GANTRY_WORKERS_PHYSICS_TWO_SAMPLE_H_
