// ShowerFileReader: an HDF5 shower file kept open for random access to any list of events (the
// input of the trainer's prefetching pipeline), in the layouts and with the checks of
// ReadShowerEvents, without loading the file's cells into memory.
#ifndef GANTRY_SHOWERS_SHOWER_FILE_READER_H_
#define GANTRY_SHOWERS_SHOWER_FILE_READER_H_

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "showers/shower_file_limits.h"
#include "showers/shower_set.h"

namespace gantry::showers {

struct ShowerFileReaderOptions {
  // Decoded chunks of the cell dataset kept (chunked/gzip files): random single-event reads hit a
  // decoded chunk instead of inflating it again. Ignored for contiguous datasets.
  int64_t chunk_cache_bytes = int64_t{64} << 20;
  ShowerFileLimits limits;  // checked when the file is opened
};

class ShowerFileReader {
 public:
  // Opens `path` and reads its small per-event datasets (energies, angles), checked as
  // ReadShowerEvents does. Errors as ReadShowerFile: NOT_FOUND, INVALID_ARGUMENT, DATA_LOSS, each
  // message starting with the path.
  static absl::StatusOr<std::unique_ptr<ShowerFileReader>> Open(
      const std::string& path, const ShowerFileReaderOptions& options = {});

  ~ShowerFileReader();
  ShowerFileReader(const ShowerFileReader&) = delete;
  ShowerFileReader& operator=(const ShowerFileReader&) = delete;

  // Events `indices` (any order, repeats allowed), in that order, cells in GeV and checked (NaN,
  // Inf and negative cells are INVALID_ARGUMENT naming the event and the cell). Contiguous runs of
  // indices are read with one HDF5 call each. OUT_OF_RANGE names an index outside [0, events()).
  // Thread-safe: several threads may read at once (HDF5 calls are serialised by the library when
  // it is built thread-safe, as Debian's is, else by a process-wide mutex).
  absl::StatusOr<ShowerSet> ReadEvents(const std::vector<int64_t>& indices) const;

  // Calls `visit(first, block)` for consecutive blocks of about `block_bytes` of cells covering
  // events [0, events()) in order (a sequential pass with bounded memory). Stops at the first
  // error of a read or of `visit`.
  absl::Status ForEachBlock(
      int64_t block_bytes,
      const std::function<absl::Status(int64_t first, const ShowerSet& block)>& visit) const;

  const std::string& path() const { return path_; }
  Layout layout() const { return layout_; }
  const std::array<int64_t, 3>& shape() const { return shape_; }
  int64_t cells_per_event() const { return shape_[0] * shape_[1] * shape_[2]; }
  int64_t events() const { return static_cast<int64_t>(energy_gev_.size()); }
  // Per-event primary energies (GeV) and angles (rad; empty for fixed-angle files).
  const std::vector<float>& energy_gev() const { return energy_gev_; }
  const std::vector<float>& theta_rad() const { return theta_rad_; }
  // The file-name prefix, else the root "particle" attribute, else "Ele" (as ReadShowerFile).
  const std::string& particle() const { return particle_; }

 private:
  struct Hdf5;  // the open file and cell dataset handles
  ShowerFileReader() = default;

  // Reads events [first, first + count) into out (GeV, checked). Caller holds the library lock.
  absl::Status ReadRun(int64_t first, int64_t count, float* out) const;

  std::string path_;
  Layout layout_ = Layout::kFixedAngle3DGan;
  std::array<int64_t, 3> shape_{0, 0, 0};
  double to_gev_ = 1.0;
  std::vector<float> energy_gev_;
  std::vector<float> theta_rad_;
  std::string particle_;
  std::unique_ptr<Hdf5> hdf5_;
};

}  // namespace gantry::showers

#endif  // GANTRY_SHOWERS_SHOWER_FILE_READER_H_
