// CheckpointModelLoader: the daemon's ModelLoader: fetches a served model's checkpoint by sha256
// through gantry-server's WorkerService.FetchCheckpoint (worker credential) into
// <models_dir>/<sha256>.pt, verified and reused across restarts, reads it once in a sandboxed child
// (a hostile checkpoint kills that child, not the daemon), then loads it as a TorchBackend, or as a
// BaselineBackend when it holds a no-network baseline.
#ifndef GANTRY_WORKERS_SERVING_CHECKPOINT_MODEL_LOADER_H_
#define GANTRY_WORKERS_SERVING_CHECKPOINT_MODEL_LOADER_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "workers/agent/agent_options.h"
#include "workers/runner/checkpoint_verifier.h"
#include "workers/serving/model_cache.h"

namespace gantry::serving {

struct CheckpointModelLoaderOptions {
  std::string server;  // host:port of gantry-server
  // The bearer of each fetch, asked for at every fetch (the daemon's worker credential, which a
  // re-registration may replace).
  std::function<std::string()> token;
  std::string models_dir;  // created if missing
  TlsConfig tls;           // how to reach the server
  // Every checkpoint is read once in a sandboxed `gantry-worker verify-checkpoint` child before it
  // is loaded in this process (runner/checkpoint_verifier.h); verify.binary must be gantry-worker
  // when this process is not.
  runner::CheckpointVerifierOptions verify;
  // Where the models run: "cpu" or "cuda:N" (workers/gan/device.h).
  std::string device = "cpu";
};

// The checkpoint path of `sha256`, fetched if it is not there or does not hash to `sha256`.
absl::StatusOr<std::string> FetchModelCheckpoint(const CheckpointModelLoaderOptions& options,
                                                 const std::string& sha256);

ModelLoader MakeCheckpointModelLoader(CheckpointModelLoaderOptions options);

// For DaemonMain: sets LibTorch's intra-op threads to --serve-threads (0 = all cores) and returns
// the loader for <cache-dir>/models; a GPU worker serves on its first GPU.
ModelLoader MakeDaemonModelLoader(const agent::AgentOptions& options);

}  // namespace gantry::serving

#endif  // GANTRY_WORKERS_SERVING_CHECKPOINT_MODEL_LOADER_H_
