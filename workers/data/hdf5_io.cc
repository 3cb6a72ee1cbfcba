// HDF5 C API behind RAII handles. The library's own error printing is switched off; its error stack
// is turned into the message of an absl::Status. Calls are serialised by a mutex unless the library
// was built thread-safe.
#include "workers/data/hdf5_io.h"

#include <hdf5.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gantry/base/status_macros.h"
#include "workers/data/toy_mc.h"

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

std::mutex& LibraryMutex() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}

// Serialises HDF5 calls (when the library is not thread-safe) and silences its error printing.
class LibraryLock {
 public:
  LibraryLock() {
    static const bool threadsafe = [] {
      hbool_t ts = 0;
      H5is_library_threadsafe(&ts);
      return ts != 0;
    }();
    if (!threadsafe) lock_.emplace(LibraryMutex());
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }

 private:
  std::optional<std::lock_guard<std::mutex>> lock_;
};

// The innermost messages of the current HDF5 error stack, then clears it.
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

std::string ShapeText(const std::vector<hsize_t>& dims) {
  return absl::StrCat("(", absl::StrJoin(dims, ","), ")");
}

bool HasLink(hid_t file, const char* name) { return H5Lexists(file, name, H5P_DEFAULT) > 0; }

// An opened numeric dataset with its dimensions.
struct Dataset {
  Handle id;
  std::string name;
  std::vector<hsize_t> dims;
};

absl::StatusOr<Dataset> OpenDataset(const std::string& path, hid_t file, const char* name) {
  Dataset ds;
  ds.name = name;
  ds.id = Handle(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
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

// Reads rows [first, first + count) of a dataset (any numeric type, converted) as float, all
// trailing dimensions included, into out.
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

// A shower file opened and checked except for its cells, which are read in blocks.
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

// Reads a per-event vector dataset of shape (N,) or (N,1) (or (N,k>col) taking column `col`).
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
    return Invalid(path, absl::StrCat("dataset '", name, "' has ", ds.dims[0], " events but '",
                                      "the shower dataset has ", events));
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

absl::StatusOr<ShowerFile> OpenShowerFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  const htri_t is_hdf5 = H5Fis_hdf5(path.c_str());
  if (is_hdf5 <= 0) {
    H5Eclear2(H5E_DEFAULT);
    return Invalid(path, "not an HDF5 file");
  }
  ShowerFile f;
  f.path = path;
  f.file = Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  if (!f.file.ok()) return Loss(path, "cannot open the HDF5 file (truncated or corrupted?)");
  const hid_t file = f.file.get();
  const char* cells_name = nullptr;
  if (HasLink(file, "showers") || HasLink(file, "incident_energies")) {
    if (!HasLink(file, "showers")) return Invalid(path, "CaloChallenge file without 'showers'");
    if (!HasLink(file, "incident_energies")) {
      return Invalid(path, "CaloChallenge file without 'incident_energies'");
    }
    f.layout = Layout::kCaloChallenge;
    f.to_gev = 1e-3;
    cells_name = "showers";
  } else if (HasLink(file, "ECAL")) {
    cells_name = "ECAL";
    if (HasLink(file, "target")) {
      f.layout = Layout::kFixedAngle3DGan;
    } else if (HasLink(file, "energy")) {
      f.layout = Layout::kVariableAngle3DGan;
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
  ASSIGN_OR_RETURN(f.cells, OpenDataset(path, file, cells_name));
  const std::vector<hsize_t>& d = f.cells.dims;
  if (f.layout == Layout::kCaloChallenge) {
    if (d.size() != 2) {
      return Invalid(path, absl::StrCat("dataset 'showers' has shape ", ShapeText(d),
                                        ", expected (N, voxels)"));
    }
    if (d[1] == 6480) {
      f.shape = {45, 16, 9};
    } else if (d[1] == 40500) {
      f.shape = {45, 50, 18};
    } else {
      return Invalid(path, absl::StrCat("dataset 'showers' has ", d[1],
                                        " voxels; supported are 6480 (CaloChallenge dataset 2, "
                                        "45x16x9) and 40500 (dataset 3, 45x50x18)"));
    }
  } else {
    const std::array<int64_t, 3> want = f.layout == Layout::kFixedAngle3DGan
                                            ? std::array<int64_t, 3>{25, 25, 25}
                                            : std::array<int64_t, 3>{51, 51, 25};
    if (d.size() != 4 || static_cast<int64_t>(d[1]) != want[0] ||
        static_cast<int64_t>(d[2]) != want[1] || static_cast<int64_t>(d[3]) != want[2]) {
      return Invalid(path, absl::StrCat("dataset 'ECAL' has shape ", ShapeText(d), ", expected (N,",
                                        want[0], ",", want[1], ",", want[2], ") for the ",
                                        LayoutName(f.layout), " layout"));
    }
    f.shape = want;
  }
  f.events = static_cast<int64_t>(d[0]);
  if (f.layout == Layout::kCaloChallenge) {
    ASSIGN_OR_RETURN(f.energy_gev,
                     ReadPerEvent(path, file, "incident_energies", f.events, 0, f.to_gev));
    RETURN_IF_ERROR(CheckEnergies(path, "incident_energies", f.energy_gev));
  } else if (f.layout == Layout::kFixedAngle3DGan) {
    ASSIGN_OR_RETURN(f.energy_gev, ReadPerEvent(path, file, "target", f.events, 1, 1.0));
    RETURN_IF_ERROR(CheckEnergies(path, "target", f.energy_gev));
  } else {
    ASSIGN_OR_RETURN(f.energy_gev, ReadPerEvent(path, file, "energy", f.events, 0, 1.0));
    RETURN_IF_ERROR(CheckEnergies(path, "energy", f.energy_gev));
    const char* theta_name = HasLink(file, "theta") ? "theta" : "mtheta";
    ASSIGN_OR_RETURN(f.theta_rad, ReadPerEvent(path, file, theta_name, f.events, 0, 1.0));
    for (size_t i = 0; i < f.theta_rad.size(); ++i) {
      if (!(f.theta_rad[i] >= 0.0f && f.theta_rad[i] <= 3.1416f)) {
        return Invalid(path, absl::StrCat("dataset '", theta_name, "' event ", i, " has angle ",
                                          f.theta_rad[i], ", expected radians in [0, pi]"));
      }
    }
  }
  f.particle_attribute = ReadParticleAttribute(file);
  return f;
}

// "(x,y,z)" of a flat cell index within an event.
std::string CellText(const std::array<int64_t, 3>& shape, int64_t cell) {
  return absl::StrCat("(", cell / (shape[1] * shape[2]), ",", (cell / shape[2]) % shape[1], ",",
                      cell % shape[2], ")");
}

// Reads cells of events [first, first + count) into out (GeV), checking every value.
absl::Status ReadCells(const ShowerFile& f, int64_t first, int64_t count, float* out) {
  const int64_t per_event = f.shape[0] * f.shape[1] * f.shape[2];
  // Blocks of at most ~16 MiB so that a failure names a small event range.
  const int64_t block = std::max<int64_t>(1, (int64_t{4} << 20) / per_event);
  for (int64_t b = 0; b < count; b += block) {
    const int64_t n = std::min(block, count - b);
    float* dst = out + b * per_event;
    RETURN_IF_ERROR(ReadRows(f.path, f.cells, first + b, n, dst));
    for (int64_t i = 0; i < n * per_event; ++i) {
      float v = dst[i];
      if (!(v >= 0.0f) || !std::isfinite(v)) {
        return Invalid(
            f.path, absl::StrCat("dataset '", f.cells.name, "' event ", first + b + i / per_event,
                                 " cell ", CellText(f.shape, i % per_event),
                                 std::isnan(v) ? " is NaN"
                                 : v < 0       ? absl::StrCat(" is negative (", v, ")")
                                               : " is infinite"));
      }
      if (f.to_gev != 1.0) dst[i] = static_cast<float>(v * f.to_gev);
    }
  }
  return absl::OkStatus();
}

std::string ParticleOf(const ShowerFile& f) {
  std::string p = ParticleFromFileName(f.path);
  return p.empty() ? f.particle_attribute : p;
}

absl::Status CheckSetForWrite(const std::string& path, const ShowerSet& s) {
  const int64_t n = s.events();
  std::array<int64_t, 3> want = s.shape;
  if (s.layout == Layout::kFixedAngle3DGan) want = {25, 25, 25};
  if (s.layout == Layout::kVariableAngle3DGan) want = {51, 51, 25};
  if (s.layout == Layout::kCaloChallenge && s.cells_per_event() != 6480 &&
      s.cells_per_event() != 40500) {
    return Invalid(path, absl::StrCat("CaloChallenge showers need 6480 or 40500 voxels, got ",
                                      s.cells_per_event()));
  }
  if (s.shape != want) {
    return Invalid(path, absl::StrCat("shower shape (", absl::StrJoin(s.shape, ","),
                                      ") does not fit the ", LayoutName(s.layout), " layout"));
  }
  if (static_cast<int64_t>(s.cells.size()) != n * s.cells_per_event()) {
    return Invalid(path, absl::StrCat("ShowerSet has ", s.cells.size(), " cells for ", n,
                                      " events of ", s.cells_per_event()));
  }
  if (s.layout == Layout::kVariableAngle3DGan && static_cast<int64_t>(s.theta_rad.size()) != n) {
    return Invalid(path, "variable-angle ShowerSet needs one theta per event");
  }
  return absl::OkStatus();
}

// Creates a float32 dataset of the given dims (gzip-chunked along events when level > 0) and writes
// data.
absl::Status WriteFloat(const std::string& path, hid_t file, const char* name,
                        const std::vector<hsize_t>& dims, const float* data, int gzip_level) {
  Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (gzip_level > 0 && dims[0] > 0) {
    hsize_t per_event = 1;
    for (size_t i = 1; i < dims.size(); ++i) per_event *= dims[i];
    std::vector<hsize_t> chunk = dims;
    chunk[0] = std::max<hsize_t>(1, std::min<hsize_t>(dims[0], (hsize_t{1} << 18) / per_event));
    H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data());
    H5Pset_deflate(dcpl.get(), static_cast<unsigned>(std::min(gzip_level, 9)));
  }
  Handle ds(
      H5Dcreate2(file, name, H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
      H5Dclose);
  if (!ds.ok()) return Loss(path, absl::StrCat("cannot create dataset '", name, "'"));
  if (dims[0] > 0 &&
      H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
    return Loss(path, absl::StrCat("cannot write dataset '", name, "'"));
  }
  return absl::OkStatus();
}

int PdgId(const std::string& particle) {
  if (particle == "Gamma") return 22;
  if (particle == "Pi0") return 111;
  if (particle == "ChPi") return 211;
  return 11;
}

}  // namespace

const char* LayoutName(Layout layout) {
  switch (layout) {
    case Layout::kFixedAngle3DGan:
      return "3dgan-fixed-angle";
    case Layout::kVariableAngle3DGan:
      return "3dgan-variable-angle";
    case Layout::kCaloChallenge:
      return "calochallenge";
  }
  return "unknown";
}

std::string ParticleFromFileName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  for (const char* p : {"ChPi", "Pi0", "Gamma", "Ele"}) {
    if (base.rfind(p, 0) == 0) return p;
  }
  return "";
}

absl::StatusOr<ShowerSet> ReadShowerEvents(const std::string& path, int64_t first, int64_t count) {
  LibraryLock lock;
  ASSIGN_OR_RETURN(ShowerFile f, OpenShowerFile(path));
  if (first < 0 || count < 0) {
    return Invalid(path, absl::StrCat("bad event range first=", first, " count=", count));
  }
  first = std::min(first, f.events);
  count = std::min(count, f.events - first);
  ShowerSet set;
  set.layout = f.layout;
  set.shape = f.shape;
  const std::string particle = ParticleOf(f);
  set.particle = particle.empty() ? "Ele" : particle;
  set.energy_gev.assign(f.energy_gev.begin() + first, f.energy_gev.begin() + first + count);
  if (!f.theta_rad.empty()) {
    set.theta_rad.assign(f.theta_rad.begin() + first, f.theta_rad.begin() + first + count);
  }
  try {
    set.cells.resize(static_cast<size_t>(count * set.cells_per_event()));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrCat(path, ": cannot allocate ", count * set.cells_per_event() * 4 / (1 << 20),
                     " MiB for ", count, " events; read it in slices with ReadShowerEvents"));
  }
  RETURN_IF_ERROR(ReadCells(f, first, count, set.cells.data()));
  return set;
}

absl::StatusOr<ShowerSet> ReadShowerFile(const std::string& path) {
  return ReadShowerEvents(path, 0, std::numeric_limits<int64_t>::max());
}

absl::StatusOr<DatasetInfo> InspectShowerFile(const std::string& path) {
  LibraryLock lock;
  ASSIGN_OR_RETURN(ShowerFile f, OpenShowerFile(path));
  DatasetInfo info;
  info.layout = f.layout;
  info.shape = f.shape;
  info.events = f.events;
  info.particle = ParticleOf(f);
  if (!f.energy_gev.empty()) {
    auto [lo, hi] = std::minmax_element(f.energy_gev.begin(), f.energy_gev.end());
    info.energy_min_gev = *lo;
    info.energy_max_gev = *hi;
  }
  if (!f.theta_rad.empty()) {
    info.has_theta = true;
    auto [lo, hi] = std::minmax_element(f.theta_rad.begin(), f.theta_rad.end());
    info.theta_min_rad = *lo;
    info.theta_max_rad = *hi;
  }
  const int64_t per_event = f.shape[0] * f.shape[1] * f.shape[2];
  const int64_t block = std::max<int64_t>(1, (int64_t{4} << 20) / per_event);
  std::vector<float> buffer(
      static_cast<size_t>(std::min(block, std::max<int64_t>(f.events, 1)) * per_event));
  double total = 0;
  for (int64_t b = 0; b < f.events; b += block) {
    const int64_t n = std::min(block, f.events - b);
    RETURN_IF_ERROR(ReadCells(f, b, n, buffer.data()));
    for (int64_t i = 0; i < n * per_event; ++i) total += buffer[i];
  }
  info.total_deposit_gev = total;
  return info;
}

absl::Status WriteShowerFile(const std::string& path, const ShowerSet& set,
                             const WriteOptions& options) {
  LibraryLock lock;
  RETURN_IF_ERROR(CheckSetForWrite(path, set));
  const hsize_t n = static_cast<hsize_t>(set.events());
  Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  if (!file.ok()) return Loss(path, "cannot create the file");
  const hid_t fid = file.get();
  const int gz = options.gzip_level;
  if (set.layout == Layout::kCaloChallenge) {
    const hsize_t voxels = static_cast<hsize_t>(set.cells_per_event());
    std::vector<float> mev(set.cells.size());
    for (size_t i = 0; i < mev.size(); ++i) mev[i] = set.cells[i] * 1000.0f;
    std::vector<float> e_mev(set.energy_gev.size());
    for (size_t i = 0; i < e_mev.size(); ++i) e_mev[i] = set.energy_gev[i] * 1000.0f;
    RETURN_IF_ERROR(WriteFloat(path, fid, "incident_energies", {n, 1}, e_mev.data(), gz));
    RETURN_IF_ERROR(WriteFloat(path, fid, "showers", {n, voxels}, mev.data(), gz));
  } else {
    const auto& s = set.shape;
    RETURN_IF_ERROR(WriteFloat(
        path, fid, "ECAL",
        {n, static_cast<hsize_t>(s[0]), static_cast<hsize_t>(s[1]), static_cast<hsize_t>(s[2])},
        set.cells.data(), gz));
    if (set.layout == Layout::kFixedAngle3DGan) {
      std::vector<float> target(n * 4, 0.0f);
      for (hsize_t i = 0; i < n; ++i) {
        target[i * 4 + 0] = static_cast<float>(PdgId(set.particle));
        target[i * 4 + 1] = set.energy_gev[i];
      }
      RETURN_IF_ERROR(WriteFloat(path, fid, "target", {n, 4}, target.data(), 0));
      if (options.write_hcal) {
        std::vector<float> hcal(n * 5 * 5 * 60, 0.0f);
        RETURN_IF_ERROR(WriteFloat(path, fid, "HCAL", {n, 5, 5, 60}, hcal.data(), gz));
      }
    } else {
      std::vector<float> mtheta(n), eta(n), sum(n);
      for (hsize_t i = 0; i < n; ++i) {
        const float* ev = set.event(static_cast<int64_t>(i));
        double total = 0;
        for (int64_t c = 0; c < set.cells_per_event(); ++c) total += ev[c];
        sum[i] = static_cast<float>(total);
        const double measured = MeasureThetaRad(ev, set.shape);
        mtheta[i] =
            std::isfinite(measured) ? static_cast<float>(measured) : 100.0f;  // as the reference
        eta[i] = static_cast<float>(-std::log(std::tan(0.5 * set.theta_rad[i])));
      }
      RETURN_IF_ERROR(WriteFloat(path, fid, "energy", {n}, set.energy_gev.data(), 0));
      RETURN_IF_ERROR(WriteFloat(path, fid, "theta", {n}, set.theta_rad.data(), 0));
      RETURN_IF_ERROR(WriteFloat(path, fid, "mtheta", {n}, mtheta.data(), 0));
      RETURN_IF_ERROR(WriteFloat(path, fid, "eta", {n}, eta.data(), 0));
      RETURN_IF_ERROR(WriteFloat(path, fid, "sum", {n}, sum.data(), 0));
    }
  }
  // The particle as a fixed-length string attribute (file names may not carry the prefix).
  Handle str_type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(str_type.get(), std::max<size_t>(1, set.particle.size()));
  Handle scalar(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(fid, "particle", str_type.get(), scalar.get(), H5P_DEFAULT, H5P_DEFAULT),
              H5Aclose);
  if (!attr.ok() || H5Awrite(attr.get(), str_type.get(), set.particle.c_str()) < 0) {
    return Loss(path, "cannot write the 'particle' attribute");
  }
  if (H5Fflush(fid, H5F_SCOPE_GLOBAL) < 0) return Loss(path, "cannot flush the file");
  return absl::OkStatus();
}

}  // namespace gantry::data
