// The reader keeps the file and the cell dataset open (with a chunk cache on its access property
// list) and reads runs of consecutive events with one hyperslab each. HDF5's own error printing is
// switched off per thread (the error stack is thread-local in thread-safe builds).
#include "workers/data/shower_file_reader.h"

#include <hdf5.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <numeric>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gantry/base/status_macros.h"
#include "workers/data/hdf5_io.h"

namespace gantry::data {
namespace {

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

 private:
  void Reset() {
    if (id_ >= 0 && close_ != nullptr) close_(id_);
    id_ = -1;
  }
  hid_t id_ = -1;
  herr_t (*close_)(hid_t) = nullptr;
};

// Serialises HDF5 calls when the library is not thread-safe (Debian's is) and silences the
// library's error printing for the calling thread.
class LibraryLock {
 public:
  LibraryLock() {
    static const bool threadsafe = [] {
      hbool_t ts = 0;
      H5is_library_threadsafe(&ts);
      return ts != 0;
    }();
    static std::mutex* mu = new std::mutex();
    if (!threadsafe) lock_.emplace(*mu);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }

 private:
  std::optional<std::lock_guard<std::mutex>> lock_;
};

std::string H5ErrorText() {
  std::vector<std::string> messages;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
        auto* out = static_cast<std::vector<std::string>*>(data);
        if (out->size() < 2 && e->desc != nullptr) out->push_back(e->desc);
        return 0;
      },
      &messages);
  H5Eclear2(H5E_DEFAULT);
  return messages.empty() ? "unknown HDF5 error" : absl::StrJoin(messages, "; ");
}

absl::Status Invalid(const std::string& path, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", what));
}
absl::Status Loss(const std::string& path, const std::string& what) {
  return absl::DataLossError(absl::StrCat(path, ": ", what, " (", H5ErrorText(), ")"));
}

bool HasLink(hid_t file, const char* name) { return H5Lexists(file, name, H5P_DEFAULT) > 0; }

std::string ShapeText(const std::vector<hsize_t>& dims) {
  return absl::StrCat("(", absl::StrJoin(dims, ","), ")");
}

struct Dataset {
  Handle id;
  std::string name;
  std::vector<hsize_t> dims;
};

absl::StatusOr<Dataset> OpenDataset(const std::string& path, hid_t file, const char* name,
                                    hid_t access = H5P_DEFAULT) {
  Dataset ds;
  ds.name = name;
  ds.id = Handle(H5Dopen2(file, name, access), H5Dclose);
  if (!ds.id.ok()) return Loss(path, absl::StrCat("cannot open dataset '", name, "'"));
  Handle type(H5Dget_type(ds.id.get()), H5Tclose);
  const H5T_class_t cls = type.ok() ? H5Tget_class(type.get()) : H5T_NO_CLASS;
  if (cls != H5T_FLOAT && cls != H5T_INTEGER) {
    return Invalid(path, absl::StrCat("dataset '", name, "' is not numeric"));
  }
  Handle space(H5Dget_space(ds.id.get()), H5Sclose);
  const int rank = space.ok() ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 0) return Loss(path, absl::StrCat("cannot read the shape of dataset '", name, "'"));
  ds.dims.resize(rank);
  H5Sget_simple_extent_dims(space.get(), ds.dims.data(), nullptr);
  return ds;
}

// Rows [first, first + count) of `ds`, all trailing dimensions, converted to float.
absl::Status ReadRows(const std::string& path, const Dataset& ds, int64_t first, int64_t count,
                      float* out) {
  if (count == 0) return absl::OkStatus();
  Handle file_space(H5Dget_space(ds.id.get()), H5Sclose);
  std::vector<hsize_t> start(ds.dims.size(), 0), extent = ds.dims;
  start[0] = static_cast<hsize_t>(first);
  extent[0] = static_cast<hsize_t>(count);
  if (!file_space.ok() || H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(),
                                              nullptr, extent.data(), nullptr) < 0) {
    return Loss(path, absl::StrCat("cannot select rows of dataset '", ds.name, "'"));
  }
  Handle mem_space(H5Screate_simple(static_cast<int>(extent.size()), extent.data(), nullptr),
                   H5Sclose);
  if (H5Dread(ds.id.get(), H5T_NATIVE_FLOAT, mem_space.get(), file_space.get(), H5P_DEFAULT, out) <
      0) {
    return Loss(path, absl::StrCat("dataset '", ds.name, "' events ", first, "-", first + count - 1,
                                   " cannot be read (truncated or corrupted file?)"));
  }
  return absl::OkStatus();
}

// A per-event dataset of shape (N,) or (N,1), or column `column` of (N,k).
absl::StatusOr<std::vector<float>> ReadPerEvent(const std::string& path, hid_t file,
                                                const char* name, int64_t events, int column,
                                                double scale) {
  ASSIGN_OR_RETURN(Dataset ds, OpenDataset(path, file, name));
  const bool rank1 = ds.dims.size() == 1 && column == 0;
  const bool rank2 = ds.dims.size() == 2 && ds.dims[1] > static_cast<hsize_t>(column);
  if (!rank1 && !rank2) {
    return Invalid(path, absl::StrCat("dataset '", name, "' has shape ", ShapeText(ds.dims),
                                      column == 0 ? ", expected (N,) or (N,1)"
                                                  : ", expected (N,k) with k >= 2"));
  }
  if (static_cast<int64_t>(ds.dims[0]) != events) {
    return Invalid(path, absl::StrCat("dataset '", name, "' has ", ds.dims[0],
                                      " events but the shower dataset has ", events));
  }
  const int64_t width = rank1 ? 1 : static_cast<int64_t>(ds.dims[1]);
  std::vector<float> raw(static_cast<size_t>(events * width));
  RETURN_IF_ERROR(ReadRows(path, ds, 0, events, raw.data()));
  std::vector<float> out(static_cast<size_t>(events));
  for (int64_t i = 0; i < events; ++i) {
    out[i] = static_cast<float>(raw[i * width + (rank1 ? 0 : column)] * scale);
  }
  return out;
}

absl::Status CheckEnergies(const std::string& path, const char* name, const std::vector<float>& e) {
  for (size_t i = 0; i < e.size(); ++i) {
    if (!std::isfinite(e[i]) || !(e[i] > 0)) {
      return Invalid(
          path, absl::StrCat("dataset '", name, "' event ", i,
                             " has a primary energy that is not a positive number (", e[i], ")"));
    }
  }
  return absl::OkStatus();
}

std::string ReadParticleAttribute(hid_t file) {
  if (H5Aexists(file, "particle") <= 0) return "";
  Handle attr(H5Aopen(file, "particle", H5P_DEFAULT), H5Aclose);
  Handle type(attr.ok() ? H5Aget_type(attr.get()) : -1, H5Tclose);
  if (!type.ok() || H5Tget_class(type.get()) != H5T_STRING || H5Tis_variable_str(type.get()) > 0) {
    H5Eclear2(H5E_DEFAULT);
    return "";
  }
  std::string value(H5Tget_size(type.get()), '\0');
  if (H5Aread(attr.get(), type.get(), value.data()) < 0) {
    H5Eclear2(H5E_DEFAULT);
    return "";
  }
  value.resize(std::strlen(value.c_str()));
  return value;
}

std::string CellText(const std::array<int64_t, 3>& shape, int64_t cell) {
  return absl::StrCat("(", cell / (shape[1] * shape[2]), ",", (cell / shape[2]) % shape[1], ",",
                      cell % shape[2], ")");
}

}  // namespace

struct ShowerFileReader::Hdf5 {
  Handle file;
  Handle access;  // dataset access properties (chunk cache)
  Dataset cells;
};

ShowerFileReader::~ShowerFileReader() {
  if (hdf5_ == nullptr) return;
  LibraryLock lock;
  hdf5_.reset();
}

absl::StatusOr<std::unique_ptr<ShowerFileReader>> ShowerFileReader::Open(
    const std::string& path, const ShowerFileReaderOptions& options) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  }
  LibraryLock lock;
  if (H5Fis_hdf5(path.c_str()) <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return Invalid(path, "not an HDF5 file");
  }
  std::unique_ptr<ShowerFileReader> r(new ShowerFileReader());
  r->path_ = path;
  r->hdf5_ = std::make_unique<Hdf5>();
  Hdf5& h = *r->hdf5_;
  h.file = Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!h.file.ok()) return Loss(path, "cannot open the HDF5 file (truncated or corrupted?)");
  const hid_t file = h.file.get();
  const char* cells_name = nullptr;
  if (HasLink(file, "showers") || HasLink(file, "incident_energies")) {
    if (!HasLink(file, "showers")) return Invalid(path, "CaloChallenge file without 'showers'");
    if (!HasLink(file, "incident_energies")) {
      return Invalid(path, "CaloChallenge file without 'incident_energies'");
    }
    r->layout_ = Layout::kCaloChallenge;
    r->to_gev_ = 1e-3;
    cells_name = "showers";
  } else if (HasLink(file, "ECAL")) {
    cells_name = "ECAL";
    if (HasLink(file, "target")) {
      r->layout_ = Layout::kFixedAngle3DGan;
    } else if (HasLink(file, "energy")) {
      r->layout_ = Layout::kVariableAngle3DGan;
      if (!HasLink(file, "theta") && !HasLink(file, "mtheta")) {
        return Invalid(path, "variable-angle file (ECAL, energy) without 'theta' or 'mtheta'");
      }
    } else {
      return Invalid(path,
                     "file has 'ECAL' but neither 'target' (3DGAN fixed angle) nor 'energy' (3DGAN "
                     "variable angle)");
    }
  } else {
    return Invalid(path,
                   "no known layout: expected 'ECAL' with 'target' or 'energy' (3DGAN), or "
                   "'showers' with 'incident_energies' (CaloChallenge)");
  }
  h.access = Handle(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose);
  if (h.access.ok() && options.chunk_cache_bytes > 0) {
    // ~100 hash slots per cached 1 MiB chunk (HDF5's advice), a prime count.
    const size_t slots = static_cast<size_t>(
        std::max<int64_t>(521, options.chunk_cache_bytes / (int64_t{1} << 20) * 100) | 1);
    H5Pset_chunk_cache(h.access.get(), slots, static_cast<size_t>(options.chunk_cache_bytes),
                       H5D_CHUNK_CACHE_W0_DEFAULT);
  }
  ASSIGN_OR_RETURN(
      h.cells, OpenDataset(path, file, cells_name, h.access.ok() ? h.access.get() : H5P_DEFAULT));
  const std::vector<hsize_t>& d = h.cells.dims;
  if (r->layout_ == Layout::kCaloChallenge) {
    if (d.size() != 2) {
      return Invalid(path, absl::StrCat("dataset 'showers' has shape ", ShapeText(d),
                                        ", expected (N, voxels)"));
    }
    if (d[1] == 6480) {
      r->shape_ = {45, 16, 9};
    } else if (d[1] == 40500) {
      r->shape_ = {45, 50, 18};
    } else {
      return Invalid(path, absl::StrCat("dataset 'showers' has ", d[1],
                                        " voxels; supported are 6480 (CaloChallenge dataset 2, "
                                        "45x16x9) and 40500 (dataset 3, 45x50x18)"));
    }
  } else {
    const std::array<int64_t, 3> want = r->layout_ == Layout::kFixedAngle3DGan
                                            ? std::array<int64_t, 3>{25, 25, 25}
                                            : std::array<int64_t, 3>{51, 51, 25};
    if (d.size() != 4 || static_cast<int64_t>(d[1]) != want[0] ||
        static_cast<int64_t>(d[2]) != want[1] || static_cast<int64_t>(d[3]) != want[2]) {
      return Invalid(path, absl::StrCat("dataset 'ECAL' has shape ", ShapeText(d), ", expected (N,",
                                        want[0], ",", want[1], ",", want[2], ") for the ",
                                        LayoutName(r->layout_), " layout"));
    }
    r->shape_ = want;
  }
  const int64_t events = static_cast<int64_t>(d[0]);
  if (r->layout_ == Layout::kCaloChallenge) {
    ASSIGN_OR_RETURN(r->energy_gev_,
                     ReadPerEvent(path, file, "incident_energies", events, 0, r->to_gev_));
    RETURN_IF_ERROR(CheckEnergies(path, "incident_energies", r->energy_gev_));
  } else if (r->layout_ == Layout::kFixedAngle3DGan) {
    ASSIGN_OR_RETURN(r->energy_gev_, ReadPerEvent(path, file, "target", events, 1, 1.0));
    RETURN_IF_ERROR(CheckEnergies(path, "target", r->energy_gev_));
  } else {
    ASSIGN_OR_RETURN(r->energy_gev_, ReadPerEvent(path, file, "energy", events, 0, 1.0));
    RETURN_IF_ERROR(CheckEnergies(path, "energy", r->energy_gev_));
    const char* theta_name = HasLink(file, "theta") ? "theta" : "mtheta";
    ASSIGN_OR_RETURN(r->theta_rad_, ReadPerEvent(path, file, theta_name, events, 0, 1.0));
    for (size_t i = 0; i < r->theta_rad_.size(); ++i) {
      if (!(r->theta_rad_[i] >= 0.0f && r->theta_rad_[i] <= 3.1416f)) {
        return Invalid(path, absl::StrCat("dataset '", theta_name, "' event ", i, " has angle ",
                                          r->theta_rad_[i], ", expected radians in [0, pi]"));
      }
    }
  }
  std::string particle = ParticleFromFileName(path);
  if (particle.empty()) particle = ReadParticleAttribute(file);
  r->particle_ = particle.empty() ? "Ele" : particle;
  return r;
}

absl::Status ShowerFileReader::ReadRun(int64_t first, int64_t count, float* out) const {
  const int64_t per_event = cells_per_event();
  RETURN_IF_ERROR(ReadRows(path_, hdf5_->cells, first, count, out));
  for (int64_t i = 0; i < count * per_event; ++i) {
    const float v = out[i];
    if (!(v >= 0.0f) || !std::isfinite(v)) {
      return Invalid(path_,
                     absl::StrCat("dataset '", hdf5_->cells.name, "' event ", first + i / per_event,
                                  " cell ", CellText(shape_, i % per_event),
                                  std::isnan(v) ? " is NaN"
                                  : v < 0       ? absl::StrCat(" is negative (", v, ")")
                                                : " is infinite"));
    }
    if (to_gev_ != 1.0) out[i] = static_cast<float>(v * to_gev_);
  }
  return absl::OkStatus();
}

absl::StatusOr<ShowerSet> ShowerFileReader::ReadEvents(const std::vector<int64_t>& indices) const {
  const int64_t n = static_cast<int64_t>(indices.size());
  const int64_t per_event = cells_per_event();
  for (int64_t k = 0; k < n; ++k) {
    if (indices[k] < 0 || indices[k] >= events()) {
      return absl::OutOfRangeError(
          absl::StrCat(path_, ": event index ", indices[k], " is outside [0, ", events(), ")"));
    }
  }
  ShowerSet set;
  set.layout = layout_;
  set.shape = shape_;
  set.particle = particle_;
  set.cells.resize(static_cast<size_t>(n * per_event));
  set.energy_gev.resize(static_cast<size_t>(n));
  if (!theta_rad_.empty()) set.theta_rad.resize(static_cast<size_t>(n));
  // Read in file order (runs of consecutive events), then place each event where it was asked.
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int64_t a, int64_t b) { return indices[a] < indices[b]; });
  std::vector<float> run;
  {
    LibraryLock lock;
    for (int64_t k = 0; k < n;) {
      int64_t end = k + 1;  // [k, end) of `order` covers events indices[order[k]] + 0, 1, ...
      while (end < n && indices[order[end]] - indices[order[end - 1]] <= 1) ++end;
      const int64_t first = indices[order[k]];
      const int64_t count = indices[order[end - 1]] - first + 1;
      run.resize(static_cast<size_t>(count * per_event));
      RETURN_IF_ERROR(ReadRun(first, count, run.data()));
      for (int64_t j = k; j < end; ++j) {
        const int64_t at = order[j];
        std::memcpy(set.mutable_event(at), run.data() + (indices[at] - first) * per_event,
                    static_cast<size_t>(per_event) * sizeof(float));
      }
      k = end;
    }
  }
  for (int64_t k = 0; k < n; ++k) {
    set.energy_gev[k] = energy_gev_[indices[k]];
    if (!theta_rad_.empty()) set.theta_rad[k] = theta_rad_[indices[k]];
  }
  return set;
}

absl::Status ShowerFileReader::ForEachBlock(
    int64_t block_bytes,
    const std::function<absl::Status(int64_t first, const ShowerSet& block)>& visit) const {
  const int64_t per_event_bytes = cells_per_event() * static_cast<int64_t>(sizeof(float));
  const int64_t block = std::max<int64_t>(1, block_bytes / per_event_bytes);
  std::vector<int64_t> indices;
  for (int64_t first = 0; first < events(); first += block) {
    indices.resize(static_cast<size_t>(std::min(block, events() - first)));
    std::iota(indices.begin(), indices.end(), first);
    ASSIGN_OR_RETURN(ShowerSet set, ReadEvents(indices));
    RETURN_IF_ERROR(visit(first, set));
  }
  return absl::OkStatus();
}

}  // namespace gantry::data
