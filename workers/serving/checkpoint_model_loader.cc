#include "workers/serving/checkpoint_model_loader.h"

#include <ATen/Parallel.h>

#include <filesystem>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "workers/gan/checkpoint_envelope.h"
#include "workers/gan/device.h"
#include "workers/runner/checkpoint_client.h"
#include "workers/runner/dataset_cache.h"
#include "workers/serving/baseline_backend.h"
#include "workers/serving/torch_backend.h"

namespace gantry::serving {

absl::StatusOr<std::string> FetchModelCheckpoint(const CheckpointModelLoaderOptions& options,
                                                 const std::string& sha256) {
  if (!runner::IsSha256Hex(sha256)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model.checkpoint_sha256: \"", sha256, "\" is not 64 lower-case hex digits"));
  }
  std::error_code ec;
  std::filesystem::create_directories(options.models_dir, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot create the model directory ", options.models_dir, ": ", ec.message()));
  }
  const std::string path = options.models_dir + "/" + sha256 + ".pt";
  if (std::filesystem::exists(path, ec)) {
    absl::StatusOr<std::string> actual = Sha256OfFile(path);
    if (actual.ok() && *actual == sha256) return path;
    std::filesystem::remove(path, ec);  // corrupt or partial: fetch again
  }
  runner::CheckpointClient client(options.server, options.token ? options.token() : "",
                                  absl::Minutes(10), ChannelCredentialsFor(options.tls));
  absl::StatusOr<runner::UploadedCheckpoint> fetched = client.Fetch(sha256, path);
  if (!fetched.ok()) return fetched.status();
  return path;
}

ModelLoader MakeCheckpointModelLoader(CheckpointModelLoaderOptions options) {
  return
      [options = std::move(options)](
          const gantry::v1::ServedModel& model) -> absl::StatusOr<std::unique_ptr<BatchBackend>> {
        absl::StatusOr<std::string> path = FetchModelCheckpoint(options, model.checkpoint_sha256());
        if (!path.ok()) return path.status();
        absl::Status safe = runner::VerifyCheckpointInChild(
            *path, absl::StrCat("checkpoint ", model.checkpoint_sha256()), options.verify);
        if (!safe.ok()) return safe;
        absl::StatusOr<gan::CheckpointKind> kind = gan::PeekCheckpointKind(*path);
        if (!kind.ok()) return kind.status();
        if (*kind == gan::CheckpointKind::kBaseline) {
          absl::StatusOr<std::unique_ptr<BaselineBackend>> backend =
              BaselineBackend::FromCheckpoint(*path);
          if (!backend.ok()) return backend.status();
          return std::unique_ptr<BatchBackend>(*std::move(backend));
        }
        absl::StatusOr<c10::Device> device = gan::ParseDevice(options.device);
        if (!device.ok()) return device.status();
        absl::StatusOr<std::unique_ptr<TorchBackend>> backend =
            TorchBackend::FromCheckpoint(*path, *device);
        if (!backend.ok()) return backend.status();
        return std::unique_ptr<BatchBackend>(*std::move(backend));
      };
}

ModelLoader MakeDaemonModelLoader(const agent::AgentOptions& options) {
  const int threads = options.serve_threads > 0
                          ? options.serve_threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  at::set_num_threads(threads);
  std::shared_ptr<agent::CredentialSlot> credential = options.credential;
  CheckpointModelLoaderOptions loader{options.server, [credential] { return credential->Get(); },
                                      options.cache_dir + "/models", options.tls};
  if (options.device == gantry::v1::DEVICE_KIND_GPU && !options.device_ids.empty()) {
    loader.device = absl::StrCat("cuda:", options.device_ids.front());
  }
  return MakeCheckpointModelLoader(std::move(loader));
}

}  // namespace gantry::serving
