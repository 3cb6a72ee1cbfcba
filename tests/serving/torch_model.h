// TorchModelFile: an untrained generator saved as a real gantry checkpoint for serving tests
// (built with the gan library; untrained weights are enough to test plumbing and determinism).
#ifndef GANTRY_TESTS_SERVING_TORCH_MODEL_H_
#define GANTRY_TESTS_SERVING_TORCH_MODEL_H_

#include <map>
#include <string>

#include "base/sha256.h"
#include "workers/gan/checkpoint.h"
#include "jobspec/model_config.h"
#include "workers/serving/model_cache.h"
#include "workers/serving/torch_backend.h"

namespace gantry::serving::testing {

struct TorchModelFile {
  std::string path;
  std::string sha256;
};

// Writes a fresh `preset` model initialised from `seed` to `path`; aborts the test on failure.
inline TorchModelFile WriteTorchModel(const std::string& preset, uint64_t seed,
                                      const std::string& path) {
  absl::StatusOr<gan::ModelConfig> config = gan::PresetConfig(preset);
  if (!config.ok()) std::abort();
  absl::StatusOr<gan::TrainingState> state = gan::NewTrainingState(*config, seed);
  if (!state.ok() || !gan::WriteCheckpoint(path, *state).ok()) std::abort();
  absl::StatusOr<std::string> sha = Sha256OfFile(path);
  if (!sha.ok()) std::abort();
  return {path, *sha};
}

// A loader that serves the given files by sha256 (NOT_FOUND for others).
inline ModelLoader LocalFileLoader(std::map<std::string, std::string> files) {
  return [files = std::move(files)](
             const gantry::v1::ServedModel& m) -> absl::StatusOr<std::unique_ptr<BatchBackend>> {
    auto it = files.find(m.checkpoint_sha256());
    if (it == files.end()) {
      return absl::NotFoundError("checkpoint " + m.checkpoint_sha256() + " is not known");
    }
    absl::StatusOr<std::unique_ptr<TorchBackend>> backend =
        TorchBackend::FromCheckpoint(it->second);
    if (!backend.ok()) return backend.status();
    return std::unique_ptr<BatchBackend>(*std::move(backend));
  };
}

}  // namespace gantry::serving::testing

#endif  // GANTRY_TESTS_SERVING_TORCH_MODEL_H_
