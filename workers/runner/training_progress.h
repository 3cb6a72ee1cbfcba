// TrainingProgress: the training loop's accounting. From each optimiser step's figures it keeps
// the run's and the epoch's loss sums, step time and time spent waiting for batches, and gives the
// Progress a rank 0 reports (samples per second and data stall over the run, the ETA, the losses:
// the step's, or the epoch's means when the step ended an epoch) and the epoch's summary line.
// Pure and torch-free: times are passed in, never read.
#ifndef GANTRY_WORKERS_RUNNER_TRAINING_PROGRESS_H_
#define GANTRY_WORKERS_RUNNER_TRAINING_PROGRESS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gantry/v1/training.pb.h"

namespace gantry::runner {

// What one optimiser step reported (gan::StepReport). Loss vectors hold the total first, then one
// value per loss part (PartNames), then the generator's profile loss when it has one.
struct StepFigures {
  std::vector<double> d_real, d_fake, g;
  double seconds = 0;            // the step's time
  double data_wait_seconds = 0;  // of which waiting for its real batch
};

class TrainingProgress {
 public:
  // `start_step`: steps completed before this loop (a resumed run); `global_batch`: samples per
  // step over all ranks; `variable_angle`: the model has an angle head (another loss part).
  TrainingProgress(bool variable_angle, int64_t epochs, int64_t steps_per_epoch, int64_t start_step,
                   double global_batch);

  struct Update {
    gantry::v1::Progress progress;
    std::string epoch_line;  // "epoch 2/5 done: ..." when the step ended an epoch, else empty
  };
  // Records a step of `epoch` (0-based) after which `step` steps are complete, `elapsed_seconds`
  // after the loop started; `epoch_end`: the step was its epoch's last. Only with `report` (rank 0)
  // is the Update filled; the other ranks keep the accounting and get an empty one.
  Update OnStep(const StepFigures& figures, int64_t epoch, int64_t step, bool epoch_end,
                double elapsed_seconds, bool report = true);

  // Time waiting for batches / step time over the run so far (0 before any step).
  double data_stall_fraction() const;

  // Names of the loss parts after the total, in the order of the loss vectors.
  static std::vector<std::string> PartNames(bool variable_angle);
  // Progress.losses keys: d_loss (mean of real and fake), d_real, d_fake, g_loss, d_<part>,
  // g_<part>, and g_profile with the profile loss.
  static void FillLosses(bool variable_angle, const std::vector<double>& d_real,
                         const std::vector<double>& d_fake, const std::vector<double>& g,
                         google::protobuf::Map<std::string, double>* out);

 private:
  // Clears the epoch's sums; the next epoch began `elapsed_seconds` after the loop started.
  void StartEpoch(double elapsed_seconds);

  const bool variable_angle_;
  const int64_t epochs_;
  const int64_t steps_per_epoch_;
  const int64_t start_step_;
  const double global_batch_;
  double wait_seconds_ = 0, step_seconds_ = 0;  // over the run
  // The current epoch.
  std::vector<double> epoch_real_, epoch_fake_, epoch_g_;
  int64_t epoch_steps_ = 0;
  double epoch_wait_ = 0, epoch_seconds_ = 0;
  double epoch_started_at_ = 0;  // elapsed seconds when the epoch began
};

}  // namespace gantry::runner

#endif  // GANTRY_WORKERS_RUNNER_TRAINING_PROGRESS_H_
