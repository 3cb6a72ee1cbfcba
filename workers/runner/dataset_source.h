// DatasetSource: materialises the training data of a job on a worker from its dataset reference:
// "toymc:<spec>" (simulated here, deterministic), "file:///abs/path.h5" (a shared filesystem) or
// "ds-<id>" (downloaded from the server's DatasetService into a local cache verified by sha256).
// Torch-free. Issue 5 grows the cache (eviction, prefetch) around it.
#ifndef GANTRY_WORKERS_RUNNER_DATASET_SOURCE_H_
#define GANTRY_WORKERS_RUNNER_DATASET_SOURCE_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "workers/data/shower_set.h"

namespace gantry::runner {

struct DatasetSourceOptions {
  std::string server;     // host:port of gantry-server (needed for "ds-" references only)
  std::string token;      // bearer token for DatasetService.ReadDataset (the worker join token)
  std::string cache_dir;  // "ds-" downloads land in <cache_dir>/datasets/<sha256>.h5
  int threads = 1;        // toy MC simulation threads (the output does not depend on it)
  absl::Duration rpc_timeout = absl::Minutes(30);  // deadline of one ReadDataset stream
  // Checked between download chunks; when set the download stops with CANCELLED.
  const std::atomic<bool>* stop = nullptr;
};

struct MaterializedDataset {
  data::ShowerSet showers;
  // Content hash: sha256 of the file bytes (file://, ds-) or of the canonical toy MC spec string
  // (data::FormatToyMcSpec) for toymc:.
  std::string sha256;
  std::string local_path;  // the HDF5 file read (empty for toymc:)
  // The range the data covers: the simulated ranges for toymc: (theta only for the variable-angle
  // layout), else the min and max over the events. theta_* are 0 without angles.
  double energy_min_gev = 0, energy_max_gev = 0;
  double theta_min_rad = 0, theta_max_rad = 0;
  bool from_cache = false;  // ds-: a valid cached copy was reused
  int64_t downloaded_bytes = 0;
};

class DatasetSource {
 public:
  explicit DatasetSource(DatasetSourceOptions options) : options_(std::move(options)) {}

  // `reference` is JobSpec.dataset. `expected_sha256` (Assignment.dataset_sha256) is checked for
  // "ds-" (and for the other kinds when non-empty). Errors name the reference: INVALID_ARGUMENT
  // (unknown kind, bad spec or path), NOT_FOUND, DATA_LOSS (hash mismatch), UNAVAILABLE (server),
  // CANCELLED (stop flag).
  absl::StatusOr<MaterializedDataset> Materialize(const std::string& reference,
                                                  const std::string& expected_sha256) const;

  // <cache_dir>/datasets/<sha256>.h5
  std::string CachePath(const std::string& sha256) const;

 private:
  absl::StatusOr<MaterializedDataset> FromToyMc(const std::string& reference) const;
  absl::StatusOr<MaterializedDataset> FromFile(const std::string& reference) const;
  absl::StatusOr<MaterializedDataset> FromServer(const std::string& reference,
                                                 const std::string& expected_sha256) const;
  // Streams dataset `id` into `part` (resuming after its current size) and returns the sha256
  // announced by the server.
  absl::StatusOr<std::string> Download(const std::string& id, const std::string& part,
                                       int64_t* bytes) const;

  DatasetSourceOptions options_;
};

}  // namespace gantry::runner

#endif  // GANTRY_WORKERS_RUNNER_DATASET_SOURCE_H_
