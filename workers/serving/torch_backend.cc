#include "workers/serving/torch_backend.h"

#include <utility>

#include "workers/serving/counter_rng.h"

namespace gantry::serving {

absl::StatusOr<std::unique_ptr<TorchBackend>> TorchBackend::FromCheckpoint(
    const std::string& path) {
  absl::StatusOr<std::unique_ptr<gan::ShowerGenerator>> generator =
      gan::ShowerGenerator::Load(path);
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
  memory_bytes_ = generator_->memory_bytes();
}

absl::Status TorchBackend::RunBatch(const std::vector<ShowerSpec>& showers, float* out) {
  const int64_t dim = generator_->noise_dim();
  const size_t n = showers.size();
  energies_.resize(n);
  thetas_.resize(traits_.variable_angle ? n : 0);
  noise_.resize(n * static_cast<size_t>(dim));
  for (size_t i = 0; i < n; ++i) {
    energies_[i] = showers[i].energy_gev;
    if (traits_.variable_angle) thetas_[i] = showers[i].theta_rad;
    CounterRng::Normal(showers[i].seed, static_cast<uint64_t>(showers[i].index), dim,
                       noise_.data() + i * static_cast<size_t>(dim));
  }
  return generator_->GenerateFromNoise(energies_, thetas_, noise_, out);
}

}  // namespace gantry::serving
