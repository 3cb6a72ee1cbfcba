// The shared HDF5 plumbing of showers/ (handles, library lock, errors, datasets); not a public
// API.
#ifndef GANTRY_SHOWERS_HDF5_COMMON_H_
#define GANTRY_SHOWERS_HDF5_COMMON_H_

#include <hdf5.h>

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

// An opened numeric dataset with its dimensions.
struct Dataset {
  Handle id;
  std::string name;
  std::vector<hsize_t> dims;
};

absl::StatusOr<Dataset> OpenDataset(const std::string& path, hid_t file, const char* name,
                                    hid_t access = H5P_DEFAULT);

// Reads rows [first, first + count) of a dataset (any numeric type, converted) as float, all
// trailing dimensions included, into out.
absl::Status ReadRows(const std::string& path, const Dataset& ds, int64_t first, int64_t count,
                      float* out);

// A shower file opened and checked except for its cells, which are read in runs.
struct ShowerFile {
  std::string path;
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

// Opens `path` read-only, detects its layout and checks shapes, energies and angles; the cell
// dataset is opened with the dataset access property list `cells_access`. Call under LibraryLock.
absl::StatusOr<ShowerFile> OpenShowerFile(const std::string& path,
                                          hid_t cells_access = H5P_DEFAULT);

// Checks the cells of events [first, first + count) just read into out (non-negative, finite)
// and converts them to GeV.
absl::Status CheckCells(const ShowerFile& f, int64_t first, int64_t count, float* out);

// Writes `particle` as the file's fixed-length string attribute 'particle'.
absl::Status WriteParticleAttribute(const std::string& path, hid_t file,
                                    const std::string& particle);

}  // namespace gantry::showers::h5

#endif  // GANTRY_SHOWERS_HDF5_COMMON_H_
