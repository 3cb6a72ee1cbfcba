// HDF5 C API behind RAII handles. The library's own error printing is switched off; its error stack
// is turned into the message of an absl::Status. Calls are serialised by a mutex unless the library
// was built thread-safe.
#include "showers/hdf5_io.h"

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <new>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "showers/hdf5_common.h"
#include "showers/toy_mc.h"

namespace gantry::showers {
namespace {

using h5::Handle;
using h5::Invalid;
using h5::LibraryLock;
using h5::Loss;
using h5::OpenShowerFile;
using h5::ShowerFile;

// Reads cells of events [first, first + count) into out (GeV), checking every value.
absl::Status ReadCells(const ShowerFile& f, int64_t first, int64_t count, float* out) {
  const int64_t per_event = f.shape[0] * f.shape[1] * f.shape[2];
  // Blocks of at most ~16 MiB so that a failure names a small event range.
  const int64_t block = std::max<int64_t>(1, (int64_t{4} << 20) / per_event);
  for (int64_t b = 0; b < count; b += block) {
    const int64_t n = std::min(block, count - b);
    float* dst = out + b * per_event;
    RETURN_IF_ERROR(h5::ReadRows(f.path, f.cells, first + b, n, dst));
    RETURN_IF_ERROR(h5::CheckCells(f, first + b, n, dst));
  }
  return absl::OkStatus();
}

std::string ParticleOf(const ShowerFile& f) {
  std::string p = ParticleFromFileName(f.path);
  return p.empty() ? f.particle_attribute : p;
}

absl::StatusOr<DatasetInfo> Inspect(const h5::FileSource& source, const InspectOptions& options) {
  LibraryLock lock;
  ASSIGN_OR_RETURN(ShowerFile f, OpenShowerFile(source, options.limits));
  if (f.events == 0) {
    return Invalid(f.path, absl::StrCat("dataset '", f.cells.name, "' holds no events"));
  }
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

absl::StatusOr<DatasetInfo> InspectSource(const h5::FileSource& source,
                                          const InspectOptions& options) {
  absl::StatusOr<DatasetInfo> info;
  try {
    info = Inspect(source, options);
  } catch (const std::bad_alloc&) {
    info = absl::ResourceExhaustedError(
        absl::StrCat(source.shown(), ": not enough memory to inspect the file"));
  }
  if (!info.ok()) return h5::ShownStatus(source, info.status());
  return info;
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
  H5Pset_obj_track_times(dcpl.get(), false);  // no timestamps: the same data, the same bytes
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
  ASSIGN_OR_RETURN(ShowerFile f, OpenShowerFile({path, "", {}}));
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

absl::StatusOr<DatasetInfo> InspectShowerFile(const std::string& path,
                                              const InspectOptions& options) {
  return InspectSource({path, options.display_name, {}}, options);
}

absl::StatusOr<DatasetInfo> InspectShowerFd(int fd, const InspectOptions& options) {
  return InspectSource({absl::StrCat("/proc/self/fd/", fd),
                        options.display_name.empty() ? "the file" : options.display_name,
                        {}},
                       options);
}

absl::StatusOr<DatasetInfo> InspectShowerImage(absl::string_view bytes,
                                               const InspectOptions& options) {
  if (bytes.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        options.display_name.empty() ? "the file" : options.display_name, ": the file is empty"));
  }
  return InspectSource(
      {"image.h5", options.display_name.empty() ? "the file" : options.display_name, bytes},
      options);
}

absl::Status WriteShowerFile(const std::string& path, const ShowerSet& set,
                             const WriteOptions& options) {
  LibraryLock lock;
  RETURN_IF_ERROR(CheckSetForWrite(path, set));
  const hsize_t n = static_cast<hsize_t>(set.events());
  Handle fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
  H5Pset_obj_track_times(fcpl.get(), false);
  Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.get(), H5P_DEFAULT), H5Fclose);
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
  RETURN_IF_ERROR(h5::WriteParticleAttribute(path, fid, set.particle));
  if (H5Fflush(fid, H5F_SCOPE_GLOBAL) < 0) return Loss(path, "cannot flush the file");
  return absl::OkStatus();
}

}  // namespace gantry::showers
