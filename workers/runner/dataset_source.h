// DatasetSource: materialises the training data of a job on a worker from its dataset reference
// through the worker's DatasetCache (<cache_dir>/datasets): "ds-<id>" is downloaded from the
// server's DatasetService (key = the dataset's sha256), "toymc:<spec>" is simulated once per worker
// in slices and written uncompressed, one event per chunk (key = sha256 of
// showers::FormatToyMcSpec), "file:///abs/path.h5" is copied in with its bytes hashed (key = the
// file's sha256). Every kind ends as a pinned, verified cache file
// (MaterializedDataset::local_path). Torch-free.
//
// file:// sources are hashed only when needed: the assignment's sha256 (when given) is the key;
// else <cache>/datasets/file-index/<sha256(path)> remembers the key of the source's (size, mtime,
// inode), so an unchanged large file is not read again for the next job. A file rewritten in place
// with the same size, mtime and inode would be missed (the cached copy is then used); anything that
// changes the mtime is noticed.
#ifndef GANTRY_WORKERS_RUNNER_DATASET_SOURCE_H_
#define GANTRY_WORKERS_RUNNER_DATASET_SOURCE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "base/file_roots.h"
#include "base/tls_config.h"
#include "showers/sandboxed_inspector.h"
#include "showers/shower_set.h"
#include "workers/runner/dataset_cache.h"

namespace gantry::runner {

struct DatasetSourceOptions {
  std::string server;     // host:port of gantry-server (needed for "ds-" references only)
  std::string token;      // bearer token for DatasetService.ReadDataset (the worker join token)
  std::string cache_dir;  // the DatasetCache lives in <cache_dir>/datasets (required)
  int threads = 1;        // toy MC simulation threads (the output does not depend on it)
  absl::Duration rpc_timeout = absl::Minutes(30);  // deadline of one ReadDataset stream
  // Checked between download chunks and toy MC slices; when set the fill stops with CANCELLED.
  const std::atomic<bool>* stop = nullptr;
  // true: MaterializedDataset::showers holds all events; false: it stays empty and the caller
  // reads local_path itself (e.g. a streaming reader). The ranges are filled either way.
  bool load_showers = true;
  // The cache evicts least-recently-used unpinned entries down to this after a fill; 0 = no limit.
  int64_t cache_max_bytes = 0;
  // Where "file://" references may point: unset = anywhere (local tools run for their own user);
  // set = only files that resolve (realpath) under these roots and outside cache_dir and
  // denied_dirs (PERMISSION_DENIED otherwise). A rank always sets it, from the daemon's
  // --file-roots (none by default: file:// is refused).
  std::optional<FileRoots> file_roots;
  // The directories the job's owner may read (the server's assignment): when set, a file:// file
  // must also resolve under one of these (PERMISSION_DENIED otherwise). A rank always sets it.
  std::optional<FileRoots> owner_file_roots;
  std::vector<std::string> denied_dirs;  // e.g. the daemon's scratch root
  TlsConfig tls;                         // how to reach the server (plaintext without a CA)
  // The first parse of a file a tenant provided (file://, ds-) when it enters the cache: always
  // in a sandboxed gantry-inspect child (showers/sandboxed_inspector.h), never in this process; a
  // helper that does not start fails the dataset (INTERNAL). Its binary defaults to gantry-inspect
  // next to the running binary (the build and the images put it next to gantry-worker).
  showers::InspectorOptions inspector = WorkerInspectorOptions();

  static showers::InspectorOptions WorkerInspectorOptions() {
    showers::InspectorOptions o;
    o.subject = "the dataset file";
    o.binary_setting = "that gantry-inspect is installed next to gantry-worker";
    o.concurrency_setting = "ranks of this worker filling its cache at once";
    // A rank process fills one dataset at a time, so one inspection per process; across a worker
    // the bound is its running ranks (its slots), each with its own child.
    o.max_concurrent = 1;
    o.queue_wait = absl::Minutes(10);
    o.timeout = absl::Minutes(10);  // a file of many GB is read through once
    return o;
  }
};

struct MaterializedDataset {
  showers::ShowerSet showers;  // empty with DatasetSourceOptions::load_showers = false
  // Content hash (the cache key): sha256 of the file bytes (file://, ds-) or of the canonical toy
  // MC spec string (showers::FormatToyMcSpec) for toymc:.
  std::string sha256;
  // The pinned cache file, <cache_dir>/datasets/<sha256>.h5, for every kind (toymc: too). It stays
  // in place (never evicted) as long as `lease` lives, i.e. as long as this struct or a copy of
  // the shared_ptr does.
  std::string local_path;
  // The range the data covers: the simulated ranges for toymc: (theta only for the variable-angle
  // layout), else the min and max over the events. theta_* are 0 without angles.
  double energy_min_gev = 0, energy_max_gev = 0;
  double theta_min_rad = 0, theta_max_rad = 0;
  bool from_cache = false;       // every kind: the cache held a valid entry, nothing was filled
  int64_t downloaded_bytes = 0;  // ds-: bytes received from the server by this call
  // The particle named by the source file's name (file://: "Ele_x.h5" -> "Ele"), since the cache
  // file is named by its hash; "" when unknown. Loaded showers without a particle get it.
  std::string particle;
  std::shared_ptr<const DatasetCache::Lease> lease;  // the pin on local_path
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

 private:
  // Each returns the pinned, verified cache entry of the reference (filling it when missing).
  absl::StatusOr<DatasetCache::Lease> FromToyMc(DatasetCache& cache, const std::string& reference,
                                                const std::string& expected_sha256) const;
  absl::StatusOr<DatasetCache::Lease> FromFile(DatasetCache& cache, const std::string& reference,
                                               const std::string& expected_sha256) const;
  absl::StatusOr<DatasetCache::Lease> FromServer(DatasetCache& cache, const std::string& reference,
                                                 const std::string& expected_sha256,
                                                 int64_t* downloaded) const;
  // The sha256 the server announces for dataset `id` (first chunk of a ReadDataset stream).
  absl::StatusOr<std::string> ProbeSha256(const std::string& id) const;
  // The ranges of a file just put in the cache, from its sandboxed inspection (named `shown` in
  // messages); removes the file when the inspection refuses it.
  absl::StatusOr<std::map<std::string, std::string>> InspectFilled(const std::string& path,
                                                                   const std::string& shown) const;
  absl::Status SetRanges(const DatasetCacheEntry& entry, const std::string& shown,
                         MaterializedDataset& d) const;
  // Streams dataset `id` into `part` (resuming after its current size) and returns the sha256
  // announced by the server.
  absl::StatusOr<std::string> Download(const std::string& id, const std::string& part,
                                       int64_t* bytes) const;

  DatasetSourceOptions options_;
};

}  // namespace gantry::runner

#endif  // GANTRY_WORKERS_RUNNER_DATASET_SOURCE_H_
