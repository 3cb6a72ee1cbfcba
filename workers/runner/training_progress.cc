#include "workers/runner/training_progress.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace gantry::runner {
namespace {

namespace v1 = ::gantry::v1;

void Accumulate(std::vector<double>& sum, const std::vector<double>& v) {
  if (sum.size() < v.size()) sum.resize(v.size(), 0.0);
  for (size_t i = 0; i < v.size(); ++i) sum[i] += v[i];
}

std::vector<double> Scaled(std::vector<double> v, double factor) {
  for (double& x : v) x *= factor;
  return v;
}

}  // namespace

TrainingProgress::TrainingProgress(bool variable_angle, int64_t epochs, int64_t steps_per_epoch,
                                   int64_t start_step, double global_batch)
    : variable_angle_(variable_angle),
      epochs_(epochs),
      steps_per_epoch_(steps_per_epoch),
      start_step_(start_step),
      global_batch_(global_batch) {}

std::vector<std::string> TrainingProgress::PartNames(bool variable_angle) {
  if (variable_angle) return {"adversarial", "energy", "angle", "ecal"};
  return {"adversarial", "energy", "ecal"};
}

void TrainingProgress::FillLosses(bool variable_angle, const std::vector<double>& d_real,
                                  const std::vector<double>& d_fake, const std::vector<double>& g,
                                  google::protobuf::Map<std::string, double>* out) {
  const std::vector<std::string> parts = PartNames(variable_angle);
  if (!d_real.empty() && !d_fake.empty()) {
    (*out)["d_real"] = d_real[0];
    (*out)["d_fake"] = d_fake[0];
    (*out)["d_loss"] = 0.5 * (d_real[0] + d_fake[0]);
    for (size_t i = 0; i < parts.size() && i + 1 < d_real.size() && i + 1 < d_fake.size(); ++i) {
      (*out)["d_" + parts[i]] = 0.5 * (d_real[i + 1] + d_fake[i + 1]);
    }
  }
  if (!g.empty()) {
    (*out)["g_loss"] = g[0];
    for (size_t i = 0; i < parts.size() && i + 1 < g.size(); ++i)
      (*out)["g_" + parts[i]] = g[i + 1];
    // The generator's profile loss comes after the heads' parts (ModelConfig::profile_loss_weight).
    if (g.size() == parts.size() + 2) (*out)["g_profile"] = g.back();
  }
}

TrainingProgress::Update TrainingProgress::OnStep(const StepFigures& figures, int64_t epoch,
                                                  int64_t step, bool epoch_end,
                                                  double elapsed_seconds, bool report) {
  Accumulate(epoch_real_, figures.d_real);
  Accumulate(epoch_fake_, figures.d_fake);
  Accumulate(epoch_g_, figures.g);
  ++epoch_steps_;
  wait_seconds_ += figures.data_wait_seconds;
  step_seconds_ += figures.seconds;
  epoch_wait_ += figures.data_wait_seconds;
  epoch_seconds_ += figures.seconds;

  Update update;
  if (!report) {
    if (epoch_end) StartEpoch(elapsed_seconds);
    return update;
  }
  v1::Progress& progress = update.progress;
  const double steps_done = static_cast<double>(step - start_step_);
  const double steps_per_second = elapsed_seconds > 0 ? steps_done / elapsed_seconds : 0;
  progress.set_epoch(static_cast<int32_t>(epoch + 1));  // completed (at the end) or current
  progress.set_epochs(static_cast<int32_t>(epochs_));
  progress.set_step(step);
  progress.set_steps_per_epoch(steps_per_epoch_);
  progress.set_samples_per_second(steps_per_second * global_batch_);
  const double remaining =
      static_cast<double>(std::max<int64_t>(0, epochs_ * steps_per_epoch_ - step));
  progress.set_eta_seconds(steps_per_second > 0 ? remaining / steps_per_second : 0);
  progress.set_data_stall_fraction(data_stall_fraction());
  if (!epoch_end) {
    FillLosses(variable_angle_, figures.d_real, figures.d_fake, figures.g,
               progress.mutable_losses());
    return update;
  }
  const double k = 1.0 / static_cast<double>(epoch_steps_);
  FillLosses(variable_angle_, Scaled(epoch_real_, k), Scaled(epoch_fake_, k), Scaled(epoch_g_, k),
             progress.mutable_losses());
  const auto loss = [&](const char* key) {
    const auto it = progress.losses().find(key);
    return it == progress.losses().end() ? 0.0 : it->second;
  };
  update.epoch_line = absl::StrFormat(
      "epoch %d/%d done: d_loss %.4f g_loss %.4f, %d steps in %.1f s, %.1f samples/s (all "
      "ranks), data stall %.1f%% (%.2f s waiting for batches)",
      epoch + 1, epochs_, loss("d_loss"), loss("g_loss"), epoch_steps_,
      elapsed_seconds - epoch_started_at_, progress.samples_per_second(),
      epoch_seconds_ > 0 ? 100 * epoch_wait_ / epoch_seconds_ : 0, epoch_wait_);
  StartEpoch(elapsed_seconds);
  return update;
}

void TrainingProgress::StartEpoch(double elapsed_seconds) {
  epoch_real_.clear();
  epoch_fake_.clear();
  epoch_g_.clear();
  epoch_steps_ = 0;
  epoch_wait_ = 0;
  epoch_seconds_ = 0;
  epoch_started_at_ = elapsed_seconds;
}

double TrainingProgress::data_stall_fraction() const {
  return step_seconds_ > 0 ? wait_seconds_ / step_seconds_ : 0;
}

}  // namespace gantry::runner
