#include "workers/gan/preprocessing.h"

#include <ATen/ATen.h>

#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gantry::gan {

absl::Status CheckShowersFitModel(const ModelConfig& config, const showers::ShowerSet& showers) {
  const showers::Layout want = config.variable_angle() ? showers::Layout::kVariableAngle3DGan
                                                       : showers::Layout::kFixedAngle3DGan;
  if (showers.layout != want || showers.shape != config.grid) {
    return absl::InvalidArgumentError(
        absl::StrCat("data grid ", showers.shape[0], "x", showers.shape[1], "x", showers.shape[2],
                     " does not fit model preset \"", config.preset, "\" (needs ", config.grid[0],
                     "x", config.grid[1], "x", config.grid[2],
                     config.variable_angle() ? ", variable angle" : "", ")"));
  }
  const int64_t n = showers.events();
  if (static_cast<int64_t>(showers.cells.size()) != n * showers.cells_per_event()) {
    return absl::InvalidArgumentError("shower set holds a wrong number of cells for its events");
  }
  if (config.variable_angle() && static_cast<int64_t>(showers.theta_rad.size()) != n) {
    return absl::InvalidArgumentError("3dgan-51 needs an incidence angle for every event");
  }
  return absl::OkStatus();
}

bool PassesEventSelection(const ModelConfig& config, const float* cells, int64_t cells_per_event) {
  double sum = 0;
  for (int64_t c = 0; c < cells_per_event; ++c) sum += cells[c];
  return sum > config.min_event_sum_gev;
}

TrainingTensors PreprocessEvents(const ModelConfig& config, const showers::ShowerSet& showers,
                                 const std::vector<int64_t>& rows) {
  const int64_t kept = static_cast<int64_t>(rows.size());
  const int64_t cells = showers.cells_per_event();
  TrainingTensors t;
  t.images = at::empty({kept, 1, config.grid[0], config.grid[1], config.grid[2]}, at::kFloat);
  t.energy100 = at::empty({kept, 1}, at::kFloat);
  t.ecal = at::empty({kept, 1}, at::kFloat);
  if (config.variable_angle()) t.theta = at::empty({kept, 1}, at::kFloat);
  float* img = t.images.data_ptr<float>();
  float* en = t.energy100.data_ptr<float>();
  float* ecal = t.ecal.data_ptr<float>();
  const float scale = static_cast<float>(config.cell_scale);
  const float threshold = static_cast<float>(config.cell_threshold);
  const bool power = config.cell_power != 1.0;
  const float exponent = static_cast<float>(config.cell_power);
  for (int64_t k = 0; k < kept; ++k) {
    const float* src = showers.event(rows[k]);
    float* dst = img + k * cells;
    double sum = 0;
    for (int64_t c = 0; c < cells; ++c) {
      const float v = src[c] * scale;
      const float kept_value = v < threshold ? 0.0f : v;
      sum += kept_value;
      // 0^p = 0: only the (few) hit cells need the power.
      dst[c] = power && kept_value > 0.0f ? std::pow(kept_value, exponent) : kept_value;
    }
    ecal[k] = static_cast<float>(sum);
    en[k] = static_cast<float>(showers.energy_gev[rows[k]] / config.energy_scale);
    if (config.variable_angle()) t.theta.data_ptr<float>()[k] = showers.theta_rad[rows[k]];
  }
  return t;
}

absl::StatusOr<TrainingTensors> PreprocessShowers(const ModelConfig& config,
                                                  const showers::ShowerSet& showers) {
  if (absl::Status fits = CheckShowersFitModel(config, showers); !fits.ok()) return fits;
  const int64_t n = showers.events();
  const int64_t cells = showers.cells_per_event();
  std::vector<int64_t> keep;
  keep.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    if (PassesEventSelection(config, showers.event(i), cells)) keep.push_back(i);
  }
  if (keep.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "no event has a cell sum above ", config.min_event_sum_gev, " GeV; nothing to train on"));
  }
  TrainingTensors t = PreprocessEvents(config, showers, keep);
  t.dropped_events = n - static_cast<int64_t>(keep.size());
  return t;
}

at::Tensor UndoCellPreprocessing(const ModelConfig& config, const at::Tensor& images) {
  at::Tensor x = images.squeeze(1).to(at::kFloat);
  if (config.cell_power != 1.0) x = at::pow(x, 1.0 / config.cell_power);
  return (x / config.cell_scale).contiguous();
}

at::Tensor EcalTarget(const ModelConfig& config, const at::Tensor& energy100) {
  at::Tensor ratio = at::zeros_like(energy100);
  for (double coefficient : config.ecal_fit) ratio = ratio * energy100 + coefficient;
  return ratio * energy100 * config.ecal_fit_scale;
}

}  // namespace gantry::gan
