#include "workers/serving/torch_backend.h"

#include <cstring>
#include <utility>

#include "base/status_macros.h"
#include "workers/gan/bf16_support.h"
#include "workers/serving/counter_rng.h"

namespace gantry::serving {

absl::StatusOr<std::unique_ptr<TorchBackend>> TorchBackend::FromCheckpoint(
    const std::string& path, const c10::Device& device) {
  absl::StatusOr<std::unique_ptr<gan::ShowerGenerator>> generator =
      gan::ShowerGenerator::Load(path, device);
  if (!generator.ok()) return generator.status();
  return std::make_unique<TorchBackend>(*std::move(generator));
}

TorchBackend::TorchBackend(std::unique_ptr<gan::ShowerGenerator> generator)
    : generator_(std::move(generator)) {
  const gan::ModelConfig& config = generator_->config();
  traits_.grid = config.grid;
  traits_.variable_angle = config.variable_angle();
  traits_.theta_min_rad = config.fake_theta_min_rad;
  traits_.theta_max_rad = config.fake_theta_max_rad;
  const absl::Status bf16 = generator_->bf16_support();
  traits_.bf16_unavailable = bf16.ok() ? "" : std::string(bf16.message());
  memory_bytes_ = generator_->memory_bytes();
}

absl::Status TorchBackend::RunGroup(const std::vector<ShowerSpec>& showers,
                                    const std::vector<size_t>& members, bool bfloat16, float* out) {
  const int64_t dim = generator_->noise_dim();
  const size_t n = members.size();
  energies_.resize(n);
  thetas_.resize(traits_.variable_angle ? n : 0);
  noise_.resize(n * static_cast<size_t>(dim));
  for (size_t i = 0; i < n; ++i) {
    const ShowerSpec& s = showers[members[i]];
    energies_[i] = s.energy_gev;
    if (traits_.variable_angle) thetas_[i] = s.theta_rad;
    CounterRng::Normal(s.seed, static_cast<uint64_t>(s.index), dim,
                       noise_.data() + i * static_cast<size_t>(dim));
  }
  RETURN_IF_ERROR(generator_->GenerateFromNoise(
      energies_, thetas_, noise_, out,
      bfloat16 ? gan::GenerationPrecision::kBFloat16 : gan::GenerationPrecision::kFloat32));
  if (generator_->draws_spots()) {
    const size_t cells = static_cast<size_t>(traits_.cells_per_shower());
    for (size_t i = 0; i < n; ++i) {
      const ShowerSpec& s = showers[members[i]];
      generator_->DrawSpots(s.seed, static_cast<uint64_t>(s.index), out + i * cells);
    }
  }
  return absl::OkStatus();
}

absl::Status TorchBackend::RunBatch(const std::vector<ShowerSpec>& showers, float* out) {
  std::vector<size_t> fp32, bf16;
  for (size_t i = 0; i < showers.size(); ++i) (showers[i].bfloat16 ? bf16 : fp32).push_back(i);
  if (fp32.empty() || bf16.empty()) {
    return RunGroup(showers, fp32.empty() ? bf16 : fp32, !bf16.empty(), out);
  }
  // A mixed batch runs as two passes; each shower's cells go back to its place in the batch.
  const size_t cells = static_cast<size_t>(traits_.cells_per_shower());
  for (const auto* group : {&fp32, &bf16}) {
    group_out_.resize(group->size() * cells);
    if (absl::Status s = RunGroup(showers, *group, group == &bf16, group_out_.data()); !s.ok()) {
      return s;
    }
    for (size_t i = 0; i < group->size(); ++i) {
      std::memcpy(out + (*group)[i] * cells, group_out_.data() + i * cells, cells * sizeof(float));
    }
  }
  return absl::OkStatus();
}

}  // namespace gantry::serving
