// Extendable datasets (maximum dimension H5S_UNLIMITED along events) with chunked storage; each
// Append grows every dataset by the same number of rows and writes the new rows as one hyperslab.
// The Debian HDF5 library is built thread-safe; this writer does not add a lock of its own.
#include "showers/shower_file_writer.h"

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "showers/hdf5_common.h"
#include "showers/hdf5_io.h"
#include "showers/toy_mc.h"

namespace gantry::showers {
namespace {

using h5::Handle;
using h5::Loss;

int PdgIdOf(const std::string& particle) {
  if (particle == "Ele") return 11;
  if (particle == "Gamma") return 22;
  if (particle == "Pi0") return 111;
  if (particle == "ChPi") return 211;
  return 0;
}

// One extendable float32 dataset: (0, row...) now, (unlimited, row...) at most.
struct Extendable {
  Handle id;
  std::string name;
  std::vector<hsize_t> row;  // dimensions after the event axis
  hsize_t per_row() const {
    hsize_t n = 1;
    for (hsize_t d : row) n *= d;
    return n;
  }
};

absl::StatusOr<Extendable> CreateExtendable(const std::string& path, hid_t file, const char* name,
                                            std::vector<hsize_t> row, hsize_t chunk_rows,
                                            int gzip_level) {
  Extendable ds;
  ds.name = name;
  ds.row = std::move(row);
  std::vector<hsize_t> dims{0}, max_dims{H5S_UNLIMITED}, chunk{std::max<hsize_t>(1, chunk_rows)};
  for (hsize_t d : ds.row) {
    dims.push_back(d);
    max_dims.push_back(d);
    chunk.push_back(d);
  }
  Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), max_dims.data()),
               H5Sclose);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (!space.ok() || !dcpl.ok() || H5Pset_obj_track_times(dcpl.get(), false) < 0 ||
      H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()) < 0 ||
      (gzip_level > 0 &&
       H5Pset_deflate(dcpl.get(), static_cast<unsigned>(std::min(gzip_level, 9))) < 0)) {
    return Loss(path, absl::StrCat("cannot set up dataset '", name, "'"));
  }
  ds.id = Handle(
      H5Dcreate2(file, name, H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
      H5Dclose);
  if (!ds.id.ok()) return Loss(path, absl::StrCat("cannot create dataset '", name, "'"));
  return ds;
}

// Grows `ds` from `first` to `first + rows` rows and writes `data` (rows x per_row floats) there.
absl::Status AppendRows(const std::string& path, const Extendable& ds, hsize_t first, hsize_t rows,
                        const float* data) {
  std::vector<hsize_t> dims{first + rows}, start{first}, extent{rows};
  for (hsize_t d : ds.row) {
    dims.push_back(d);
    start.push_back(0);
    extent.push_back(d);
  }
  if (H5Dset_extent(ds.id.get(), dims.data()) < 0) {
    return Loss(path,
                absl::StrCat("cannot extend dataset '", ds.name, "' to ", first + rows, " events"));
  }
  Handle file_space(H5Dget_space(ds.id.get()), H5Sclose);
  Handle mem_space(H5Screate_simple(static_cast<int>(extent.size()), extent.data(), nullptr),
                   H5Sclose);
  if (!file_space.ok() || !mem_space.ok() ||
      H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, extent.data(),
                          nullptr) < 0 ||
      H5Dwrite(ds.id.get(), H5T_NATIVE_FLOAT, mem_space.get(), file_space.get(), H5P_DEFAULT,
               data) < 0) {
    return Loss(path, absl::StrCat("cannot write events ", first, "-", first + rows - 1,
                                   " of dataset '", ds.name, "'"));
  }
  return absl::OkStatus();
}

}  // namespace

struct ShowerFileWriter::Files {
  Handle file;
  Extendable ecal;
  // Fixed angle: target. Variable angle: energy, theta, mtheta, eta, sum.
  std::vector<Extendable> per_event;
};

absl::StatusOr<Layout> Layout3DGanForShape(const std::array<int64_t, 3>& shape) {
  if (shape == std::array<int64_t, 3>{25, 25, 25}) return Layout::kFixedAngle3DGan;
  if (shape == std::array<int64_t, 3>{51, 51, 25}) return Layout::kVariableAngle3DGan;
  return absl::InvalidArgumentError(
      absl::StrCat("showers of shape ", absl::StrJoin(shape, "x"),
                   " have no 3DGAN layout (25x25x25 is fixed angle, 51x51x25 variable angle)"));
}

ShowerFileWriter::ShowerFileWriter(std::string path, ShowerFileWriterOptions options)
    : path_(std::move(path)), options_(std::move(options)) {}

ShowerFileWriter::~ShowerFileWriter() { Close().IgnoreError(); }

absl::StatusOr<std::unique_ptr<ShowerFileWriter>> ShowerFileWriter::Create(
    const std::string& path, const ShowerFileWriterOptions& options) {
  if (options.layout == Layout::kCaloChallenge) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the streaming writer writes the 3DGAN layouts only"));
  }
  if (PdgIdOf(options.particle) == 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": unknown particle '", options.particle,
                                                   "' (Ele, Gamma, Pi0 or ChPi)"));
  }
  std::unique_ptr<ShowerFileWriter> writer(new ShowerFileWriter(path, options));
  const bool fixed = options.layout == Layout::kFixedAngle3DGan;
  writer->shape_ = fixed ? std::array<int64_t, 3>{25, 25, 25} : std::array<int64_t, 3>{51, 51, 25};
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  auto files = std::make_unique<Files>();
  // No timestamps in object headers: the same showers give the same bytes (and SHA-256).
  Handle fcpl(H5Pcreate(H5P_FILE_CREATE), H5Pclose);
  H5Pset_obj_track_times(fcpl.get(), false);
  files->file = Handle(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, fcpl.get(), H5P_DEFAULT), H5Fclose);
  if (!files->file.ok()) return Loss(path, "cannot create the file");
  const hid_t fid = files->file.get();
  const auto& s = writer->shape_;
  const hsize_t per_event = static_cast<hsize_t>(s[0] * s[1] * s[2]);
  const hsize_t chunk_events = options.chunk_events > 0
                                   ? static_cast<hsize_t>(options.chunk_events)
                                   : std::max<hsize_t>(1, (hsize_t{1} << 18) / per_event);
  ASSIGN_OR_RETURN(files->ecal,
                   CreateExtendable(path, fid, "ECAL",
                                    {static_cast<hsize_t>(s[0]), static_cast<hsize_t>(s[1]),
                                     static_cast<hsize_t>(s[2])},
                                    chunk_events, options.gzip_level));
  if (fixed) {
    ASSIGN_OR_RETURN(Extendable target, CreateExtendable(path, fid, "target", {4}, 1024, 0));
    files->per_event.push_back(std::move(target));
  } else {
    for (const char* name : {"energy", "theta", "mtheta", "eta", "sum"}) {
      ASSIGN_OR_RETURN(Extendable ds, CreateExtendable(path, fid, name, {}, 1024, 0));
      files->per_event.push_back(std::move(ds));
    }
  }
  // The particle as a fixed-length string attribute, as WriteShowerFile writes it.
  RETURN_IF_ERROR(h5::WriteParticleAttribute(path, fid, options.particle));
  writer->files_ = std::move(files);
  return writer;
}

absl::Status ShowerFileWriter::Append(const float* cells, int64_t events, const float* energy_gev,
                                      const float* theta_rad) {
  if (files_ == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(path_, ": the writer is closed"));
  }
  if (events < 0) return absl::InvalidArgumentError(absl::StrCat(path_, ": negative event count"));
  if (events == 0) return absl::OkStatus();
  const bool fixed = options_.layout == Layout::kFixedAngle3DGan;
  if (!fixed && theta_rad == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": the variable-angle layout needs one angle per event"));
  }
  const int64_t per_event = cells_per_event();
  std::vector<float> mtheta, eta, sum;
  if (!fixed) {
    mtheta.resize(events);
    eta.resize(events);
    sum.resize(events);
  }
  for (int64_t i = 0; i < events; ++i) {
    const int64_t index = events_ + i;
    if (!std::isfinite(energy_gev[i]) || !(energy_gev[i] > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(path_, ": event ", index,
                                                     " has a primary energy that is not positive (",
                                                     energy_gev[i], ")"));
    }
    const float* ev = cells + i * per_event;
    double total = 0;
    for (int64_t c = 0; c < per_event; ++c) {
      if (!(ev[c] >= 0.0f) || !std::isfinite(ev[c])) {
        return absl::InvalidArgumentError(absl::StrCat(path_, ": event ", index, " cell ", c,
                                                       " is negative or not finite (", ev[c], ")"));
      }
      total += ev[c];
    }
    if (!fixed) {
      if (!(theta_rad[i] >= 0.0f && theta_rad[i] <= 3.1416f)) {
        return absl::InvalidArgumentError(absl::StrCat(path_, ": event ", index, " has angle ",
                                                       theta_rad[i],
                                                       ", expected radians in [0, pi]"));
      }
      sum[i] = static_cast<float>(total);
      const double measured = MeasureThetaRad(ev, shape_);
      mtheta[i] = std::isfinite(measured) ? static_cast<float>(measured) : 100.0f;
      eta[i] = static_cast<float>(-std::log(std::tan(0.5 * theta_rad[i])));
    }
  }
  const hsize_t first = static_cast<hsize_t>(events_);
  const hsize_t rows = static_cast<hsize_t>(events);
  // Per-event datasets first: a failure in ECAL's larger write then leaves a shorter ECAL, which
  // readers reject, rather than a file that looks complete.
  if (fixed) {
    std::vector<float> target(rows * 4, 0.0f);
    for (hsize_t i = 0; i < rows; ++i) {
      target[i * 4 + 0] = static_cast<float>(PdgIdOf(options_.particle));
      target[i * 4 + 1] = energy_gev[i];
    }
    RETURN_IF_ERROR(AppendRows(path_, files_->per_event[0], first, rows, target.data()));
  } else {
    const float* columns[] = {energy_gev, theta_rad, mtheta.data(), eta.data(), sum.data()};
    for (size_t k = 0; k < files_->per_event.size(); ++k) {
      RETURN_IF_ERROR(AppendRows(path_, files_->per_event[k], first, rows, columns[k]));
    }
  }
  RETURN_IF_ERROR(AppendRows(path_, files_->ecal, first, rows, cells));
  events_ += events;
  // On disk after every Append: another reader (another process, or this one through the checked
  // driver, which does not share the writer's caches) sees the showers appended so far.
  if (H5Fflush(files_->file.get(), H5F_SCOPE_LOCAL) < 0)
    return Loss(path_, "cannot flush the file");
  return absl::OkStatus();
}

absl::Status ShowerFileWriter::Append(const ShowerSet& set) {
  if (set.layout != options_.layout || set.shape != shape_) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": a ", LayoutName(set.layout), " set of shape ", absl::StrJoin(set.shape, "x"),
        " cannot be appended to a ", LayoutName(options_.layout), " file"));
  }
  if (static_cast<int64_t>(set.cells.size()) != set.events() * cells_per_event()) {
    return absl::InvalidArgumentError(absl::StrCat(path_, ": ShowerSet has ", set.cells.size(),
                                                   " cells for ", set.events(), " events"));
  }
  const bool fixed = options_.layout == Layout::kFixedAngle3DGan;
  if (!fixed && static_cast<int64_t>(set.theta_rad.size()) != set.events()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": variable-angle ShowerSet needs one theta per event"));
  }
  return Append(set.cells.data(), set.events(), set.energy_gev.data(),
                fixed ? nullptr : set.theta_rad.data());
}

absl::Status ShowerFileWriter::Close() {
  if (files_ == nullptr) return absl::OkStatus();
  std::unique_ptr<Files> files = std::move(files_);
  const bool flushed = H5Fflush(files->file.get(), H5F_SCOPE_GLOBAL) >= 0;
  files->per_event.clear();
  files->ecal.id.Close();
  if (!flushed) return Loss(path_, "cannot flush the file");
  if (!files->file.Close()) return Loss(path_, "cannot close the file");
  return absl::OkStatus();
}

}  // namespace gantry::showers
