#include "workers/serving/baseline_backend.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "workers/baseline/baseline_checkpoint.h"

namespace gantry::serving {

absl::StatusOr<std::unique_ptr<BaselineBackend>> BaselineBackend::FromCheckpoint(
    const std::string& path) {
  absl::StatusOr<baseline::BaselineParameters> parameters = baseline::ReadBaselineCheckpoint(path);
  if (!parameters.ok()) return parameters.status();
  absl::StatusOr<baseline::BaselineSampler> sampler =
      baseline::BaselineSampler::Create(*std::move(parameters));
  if (!sampler.ok()) return sampler.status();
  return std::make_unique<BaselineBackend>(*std::move(sampler));
}

BaselineBackend::BaselineBackend(baseline::BaselineSampler sampler) : sampler_(std::move(sampler)) {
  const baseline::BaselineParameters& p = sampler_.parameters();
  traits_.grid = p.grid;
  traits_.variable_angle = false;
  traits_.bf16_unavailable =
      absl::StrCat("model is a ", baseline::BaselinePresetName(p.kind),
                   " baseline (no network), drawn in float32 only; use PRECISION_FP32");
  memory_bytes_ = (2 + static_cast<int64_t>(p.modes.size())) * p.cells() * 4;
}

absl::Status BaselineBackend::RunBatch(const std::vector<ShowerSpec>& showers, float* out) {
  const int64_t cells = sampler_.cells();
  for (size_t i = 0; i < showers.size(); ++i) {
    if (showers[i].bfloat16) return absl::FailedPreconditionError(traits_.bf16_unavailable);
  }
  for (size_t i = 0; i < showers.size(); ++i) {
    const ShowerSpec& s = showers[i];
    sampler_.Draw(s.energy_gev, s.seed, static_cast<uint64_t>(s.index),
                  out + static_cast<int64_t>(i) * cells);
  }
  return absl::OkStatus();
}

}  // namespace gantry::serving
