// The shared HDF5 plumbing of showers/ (handles, library lock, errors, datasets); not a public
// API.
#ifndef GANTRY_SHOWERS_HDF5_COMMON_H_
#define GANTRY_SHOWERS_HDF5_COMMON_H_

#include <hdf5.h>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "showers/shower_file_limits.h"
#include "showers/shower_set.h"

namespace gantry::showers::h5 {

// Owns one hid_t and closes it with the matching H5*close.
class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Handle(Handle&& o) noexcept : id_(std::exchange(o.id_, -1)), close_(o.close_) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      Reset();
      id_ = std::exchange(o.id_, -1);
      close_ = o.close_;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { Reset(); }
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }
  // Closes now and reports whether the close succeeded.
  bool Close() {
    const bool ok = id_ < 0 || close_ == nullptr || close_(id_) >= 0;
    id_ = -1;
    return ok;
  }

 private:
  void Reset() {
    if (id_ >= 0 && close_ != nullptr) close_(id_);
    id_ = -1;
  }
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

// Serialises HDF5 calls with one process-wide mutex when the library is not thread-safe (Debian's
// is) and silences the library's error printing for the calling thread.
class LibraryLock {
 public:
  LibraryLock();

 private:
  std::optional<std::lock_guard<std::mutex>> lock_;
};

// The innermost messages of the current HDF5 error stack, then clears it.
std::string ErrorText();

// "<path>: <what>" as InvalidArgument.
absl::Status Invalid(const std::string& path, const std::string& what);
// "<path>: <what> (<HDF5 error text>)" as DataLoss.
absl::Status Loss(const std::string& path, const std::string& what);

// "(d0,d1,...)".
std::string ShapeText(const std::vector<hsize_t>& dims);

bool HasLink(hid_t file, const char* name);

// Decoded chunks a chunked dataset keeps by default (libhdf5's default chunk cache).
constexpr int64_t kDefaultChunkCacheBytes = int64_t{1} << 20;

// An opened numeric dataset with its dimensions.
class ChunkReader;  // showers/chunk_reader.h

struct Dataset {
  Handle id;
  std::string name;
  std::vector<hsize_t> dims;
  // A chunked dataset's reader (ReadRows reads its chunks through it, not through libhdf5).
  std::shared_ptr<ChunkReader> chunks;
};

// Opens the numeric dataset `name` of `file` and checks it before anything is read: a hard or soft
// link to a dataset (no external links, virtual datasets or external raw data), integer or float
// elements of 1-8 bytes, rank 1-4, element and byte counts within `limits` (overflow-checked),
// and its stored bytes present in the file: every chunk of a chunked dataset allocated, a
// contiguous dataset's bytes inside the file's `file_size` bytes, compression within
// limits.max_compression_ratio. INVALID_ARGUMENT names the dataset and the problem. A chunked
// dataset keeps up to `chunk_cache_bytes` of decoded chunks for its reads.
absl::StatusOr<Dataset> OpenDataset(const std::string& path, hid_t file, const char* name,
                                    const ShowerFileLimits& limits, int64_t file_size,
                                    int64_t chunk_cache_bytes = kDefaultChunkCacheBytes);

// Where a shower file's bytes come from: a path (a real file or /proc/self/fd/N) or an in-memory
// image (opened with HDF5's core driver, for fuzzing and tests).
struct FileSource {
  std::string path;         // opened by HDF5; with an image, only a name
  std::string display;      // named in messages (e.g. the user's file name); empty = path
  absl::string_view image;  // when non-empty, the file's bytes (path is not opened)
  const std::string& shown() const { return display.empty() ? path : display; }
};

// Reads rows [first, first + count) of a dataset (any numeric type, converted) as float, all
// trailing dimensions included, into out.
absl::Status ReadRows(const std::string& path, const Dataset& ds, int64_t first, int64_t count,
                      float* out);

// A shower file opened and checked except for its cells, which are read in runs.
struct ShowerFile {
  std::string path;  // as named in messages (FileSource::shown)
  Handle file;
  Layout layout = Layout::kFixedAngle3DGan;
  std::array<int64_t, 3> shape{0, 0, 0};
  int64_t events = 0;
  double to_gev = 1.0;  // 1e-3 for CaloChallenge (MeV)
  Dataset cells;
  std::vector<float> energy_gev;  // all events (small)
  std::vector<float> theta_rad;   // all events, variable angle only
  std::string particle_attribute;
};

// Opens `source` read-only, detects its layout and checks shapes, energies and angles within
// `limits` (see OpenDataset); the cell dataset keeps up to `cells_chunk_cache_bytes` of decoded
// chunks. Messages name source.shown(), never source.path when a display name is given.
// Call under LibraryLock.
absl::StatusOr<ShowerFile> OpenShowerFile(
    const FileSource& source, const ShowerFileLimits& limits = {},
    int64_t cells_chunk_cache_bytes = kDefaultChunkCacheBytes);

// `status` with every occurrence of source.path in its message replaced by source.shown() (HDF5's
// own error text may quote the path it opened).
absl::Status ShownStatus(const FileSource& source, absl::Status status);

// Checks the cells of events [first, first + count) just read into out (non-negative, finite)
// and converts them to GeV.
absl::Status CheckCells(const ShowerFile& f, int64_t first, int64_t count, float* out);

// Writes `particle` as the file's fixed-length string attribute 'particle'.
absl::Status WriteParticleAttribute(const std::string& path, hid_t file,
                                    const std::string& particle);

}  // namespace gantry::showers::h5

#endif  // GANTRY_SHOWERS_HDF5_COMMON_H_
