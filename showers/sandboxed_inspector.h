// SandboxedInspector: inspects an untrusted shower file in a short-lived gantry-inspect child
// process with resource limits and no network, so a hostile file costs one child, never the
// process that asked: gantry-server for every upload, a worker for every dataset it caches.
#ifndef GANTRY_SHOWERS_SANDBOXED_INSPECTOR_H_
#define GANTRY_SHOWERS_SANDBOXED_INSPECTOR_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/sandboxed_process.h"
#include "showers/hdf5_io.h"

namespace gantry::showers {

// How files are inspected (gantry-server's --inspect-* flags; the worker's defaults).
struct InspectorOptions {
  // The helper; empty = "gantry-inspect" next to the running binary (/proc/self/exe's folder).
  std::string binary;
  absl::Duration timeout = absl::Seconds(120);  // wall clock of one inspection
  SandboxLimits limits;                         // cpu_seconds follows the timeout when 0
  ShowerFileLimits file_limits;                 // passed to the helper
  // At most this many inspections run at once, server-wide (each is a child with its own CPU and
  // memory limits); another waits up to queue_wait for one to end, then is UNAVAILABLE.
  int max_concurrent = 4;
  absl::Duration queue_wait = absl::Seconds(30);
  // How messages name the file ("the uploaded file \"x.h5\"") and the setting that picks the
  // helper and bounds the concurrency (for the operator).
  std::string subject = "the uploaded file";
  std::string binary_setting = "gantry-server's --inspect-binary";
  std::string concurrency_setting = "--inspect-concurrency";
};

// Thread-safe: inspections run in parallel, one child each, at most max_concurrent at once.
class SandboxedInspector {
 public:
  explicit SandboxedInspector(InspectorOptions options);

  // Inspects the file at `path` (opened here read-only and handed to the child as a file
  // descriptor; the child never sees the path). Messages name `file_name` (the name the client
  // gave), never `path`: INVALID_ARGUMENT "<subject> <file_name> ..." for a file the inspection
  // refuses or that kills, stalls or floods the child; INTERNAL (without paths) when the helper
  // cannot run at all, which is the operator's to fix (the log has the details): nothing is ever
  // parsed in this process instead.
  absl::StatusOr<DatasetInfo> Inspect(const std::string& path, const std::string& file_name) const;

  // The helper binary in use (for the start-up log).
  const std::string& binary() const { return options_.binary; }

 private:
  bool HasRoom() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return running_ < options_.max_concurrent;
  }
  absl::StatusOr<DatasetInfo> RunInspection(const std::string& path, const std::string& file_name,
                                            const std::string& shown) const;

  InspectorOptions options_;
  mutable absl::Mutex mu_;
  mutable int running_ ABSL_GUARDED_BY(mu_) = 0;
};

// The default helper path: "gantry-inspect" in the folder of /proc/self/exe.
std::string DefaultInspectBinary();

}  // namespace gantry::showers

#endif  // GANTRY_SHOWERS_SANDBOXED_INSPECTOR_H_
