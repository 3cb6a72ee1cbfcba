// The shared HDF5 plumbing of showers/: one copy for hdf5_io, the reader and the writer.
#include "showers/hdf5_common.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "base/status_macros.h"
#include "showers/attribute_guard.h"
#include "showers/checked_file_driver.h"
#include "showers/chunk_reader.h"
#include "showers/hdf5_io.h"

namespace gantry::showers::h5 {
namespace {

std::mutex& LibraryMutex() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}

// The root group's "particle" attribute, "" when it has none that is a scalar fixed-length string
// of at most 256 bytes. libhdf5 decodes attribute messages unchecked: it is asked only when `check`
// (CheckRootGroup's read of the root group's header) found every attribute message sound.
absl::StatusOr<std::string> ReadParticleAttribute(const std::string& path, hid_t file,
                                                  const AttributeCheck& check) {
  if (check.verdict == AttributeVerdict::kDamaged) return Invalid(path, check.detail);
  if (check.verdict == AttributeVerdict::kUnchecked) return std::string();
  if (H5Aexists(file, "particle") <= 0) return std::string();
  Handle attr(H5Aopen(file, "particle", H5P_DEFAULT), H5Aclose);
  Handle type(attr.ok() ? H5Aget_type(attr.get()) : -1, H5Tclose);
  Handle space(attr.ok() ? H5Aget_space(attr.get()) : -1, H5Sclose);
  // H5Aread writes every point of the attribute: one value of at most 256 bytes fits the buffer.
  if (!type.ok() || !space.ok() || H5Tget_class(type.get()) != H5T_STRING ||
      H5Tis_variable_str(type.get()) > 0 || H5Tget_size(type.get()) > 256 ||
      H5Sget_simple_extent_npoints(space.get()) != 1) {
    H5Eclear2(H5E_DEFAULT);
    return std::string();
  }
  std::string value(H5Tget_size(type.get()), '\0');
  if (H5Aread(attr.get(), type.get(), value.data()) < 0) {
    H5Eclear2(H5E_DEFAULT);
    return std::string();
  }
  value.resize(std::strlen(value.c_str()));
  return value;
}

// Deflate, the only compression gantry's files use, shrinks data at most ~1032:1; 1100 leaves room
// for the other filters' headers.
constexpr double kMaxInflation = 1100.0;

// Sizes come from the file: a dataset whose dims claim more values than its stored bytes can
// hold (e.g. chunks never written, read back as fill values) is refused before anything is
// allocated or read for it.
absl::Status CheckBackedByStorage(const std::string& path, const Dataset& ds) {
  double values = 1.0;  // a double: dims may multiply past 2^64
  for (hsize_t d : ds.dims) values *= static_cast<double>(d);
  // The stored size comes from the file too (a contiguous layout states it): never more than the
  // file itself holds.
  hsize_t file_bytes = 0;
  Handle file(H5Iget_file_id(ds.id.get()), H5Fclose);
  if (!file.ok() || H5Fget_filesize(file.get(), &file_bytes) < 0) file_bytes = 0;
  const double stored =
      static_cast<double>(std::min<hsize_t>(H5Dget_storage_size(ds.id.get()), file_bytes));
  if (values * sizeof(float) > kMaxInflation * stored + 4096.0) {
    return Invalid(path, absl::StrCat("dataset '", ds.name, "' has shape ", ShapeText(ds.dims),
                                      " but stores only ", stored,
                                      " bytes; the file is damaged (data never written?)"));
  }
  return absl::OkStatus();
}

// Reads a per-event vector dataset of shape (N,) or (N,1) (or (N,k>col) taking column `col`).
absl::StatusOr<std::vector<float>> ReadPerEvent(const std::string& path, hid_t file,
                                                const char* name, int64_t events, int column,
                                                double scale, const ShowerFileLimits& limits,
                                                int64_t file_size) {
  ASSIGN_OR_RETURN(Dataset ds, OpenDataset(path, file, name, limits, file_size));
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
  if (rank2 && ds.dims[1] > static_cast<hsize_t>(limits.max_per_event_columns)) {
    return Invalid(
        path, absl::StrCat("dataset '", name, "' has ", ds.dims[1], " columns per event; at most ",
                           limits.max_per_event_columns, " are accepted"));
  }
  RETURN_IF_ERROR(CheckBackedByStorage(path, ds));
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

// "(x,y,z)" of a flat cell index within an event.
std::string CellText(const std::array<int64_t, 3>& shape, int64_t cell) {
  return absl::StrCat("(", cell / (shape[1] * shape[2]), ",", (cell / shape[2]) % shape[1], ",",
                      cell % shape[2], ")");
}

}  // namespace

LibraryLock::LibraryLock() {
  static const bool threadsafe = [] {
    hbool_t ts = 0;
    H5is_library_threadsafe(&ts);
    return ts != 0;
  }();
  if (!threadsafe) lock_.emplace(LibraryMutex());
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

std::string ErrorText() {
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
  return absl::DataLossError(absl::StrCat(path, ": ", what, " (", ErrorText(), ")"));
}

std::string ShapeText(const std::vector<hsize_t>& dims) {
  return absl::StrCat("(", absl::StrJoin(dims, ","), ")");
}

bool HasLink(hid_t file, const char* name) { return H5Lexists(file, name, H5P_DEFAULT) > 0; }

namespace {

// Chunks larger than an event's extent or than kMaxChunkBytes do not occur in files written by
// HDF5 itself; HDF5 1.10.8 reads out of bounds on such a corrupt layout (found by
// hdf5_inspect_fuzzer: chunk (1,25,25,32793) on a (2,25,25,25) dataset), so they are refused first.
constexpr double kMaxChunkBytes = double{1 << 30};

absl::Status CheckChunks(const std::string& path, const Dataset& ds) {
  Handle plist(H5Dget_create_plist(ds.id.get()), H5Pclose);
  if (!plist.ok() || H5Pget_layout(plist.get()) != H5D_CHUNKED) return absl::OkStatus();
  std::vector<hsize_t> chunk(ds.dims.size(), 0);
  if (H5Pget_chunk(plist.get(), static_cast<int>(chunk.size()), chunk.data()) !=
      static_cast<int>(chunk.size())) {
    return Loss(path, absl::StrCat("cannot read the chunk shape of dataset '", ds.name, "'"));
  }
  double bytes = sizeof(double);
  for (size_t i = 0; i < chunk.size(); ++i) {
    bytes *= static_cast<double>(chunk[i]);
    // Axis 0 (events) may be extendible and empty; the per-event axes are fixed.
    if (chunk[i] == 0 || (i > 0 && chunk[i] > ds.dims[i])) bytes = kMaxChunkBytes * 2;
  }
  if (bytes > kMaxChunkBytes) {
    return Invalid(
        path, absl::StrCat("dataset '", ds.name, "' of shape ", ShapeText(ds.dims),
                           " has chunks of shape ", ShapeText(chunk), "; the file is damaged"));
  }
  return absl::OkStatus();
}

// Checks that `name` is a hard or soft link to a dataset, not an external link, a group or a type.
absl::Status CheckDatasetLink(const std::string& path, hid_t file, const char* name,
                              const std::string& quoted) {
  H5L_info_t link{};
  if (H5Lget_info(file, name, &link, H5P_DEFAULT) < 0) {
    return Loss(path, absl::StrCat("cannot read the link of ", quoted));
  }
  if (link.type != H5L_TYPE_HARD && link.type != H5L_TYPE_SOFT) {
    return Invalid(path, absl::StrCat(quoted,
                                      " is an external or user-defined link; only datasets "
                                      "stored in the file itself are accepted"));
  }
  Handle object(H5Oopen(file, name, H5P_DEFAULT), H5Oclose);
  if (!object.ok()) return Loss(path, absl::StrCat("cannot open ", quoted));
  if (H5Iget_type(object.get()) != H5I_DATASET) {
    return Invalid(path, absl::StrCat("'", name, "' is not a dataset (a group or a named type)"));
  }
  object.Close();
  return absl::OkStatus();
}

// Checks that the dataset's element `type` is an integer or float of 1-8 bytes; returns its size.
absl::StatusOr<size_t> CheckElementType(const std::string& path, const char* name,
                                        const std::string& quoted, const Handle& type) {
  const H5T_class_t cls = type.ok() ? H5Tget_class(type.get()) : H5T_NO_CLASS;
  if (cls != H5T_FLOAT && cls != H5T_INTEGER) {
    H5Eclear2(H5E_DEFAULT);
    return Invalid(path, absl::StrCat(quoted, " is not numeric"));
  }
  const size_t element_bytes = H5Tget_size(type.get());
  if (element_bytes < 1 || element_bytes > 8) {
    return Invalid(path, absl::StrCat(quoted, " has ", element_bytes,
                                      "-byte elements; expected integers or floats of 1-8 bytes"));
  }
  // A number takes at most 16 bytes; HDF5 sizes its conversion buffers by the element size read
  // from the file (a corrupt one made it calloc gigabytes; found by hdf5_inspect_fuzzer).
  const size_t value_bytes = H5Tget_size(type.get());
  if (value_bytes == 0 || value_bytes > 16) {
    return Invalid(path, absl::StrCat("dataset '", name, "' has ", value_bytes,
                                      "-byte values; numbers of at most 16 bytes are supported"));
  }
  return element_bytes;
}

// Reads the dataset's rank (1 to 4, checked first) and then its dimensions from `space` into dims.
absl::Status ReadShape(const std::string& path, const std::string& quoted, const Handle& space,
                       std::vector<hsize_t>* dims) {
  const int rank = space.ok() ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 0) return Loss(path, absl::StrCat("cannot read the shape of ", quoted));
  if (rank < 1 || rank > 4) {
    return Invalid(path, absl::StrCat(quoted, " has rank ", rank, "; expected 1 to 4"));
  }
  dims->resize(rank);
  if (H5Sget_simple_extent_dims(space.get(), dims->data(), nullptr) < 0) {
    return Loss(path, absl::StrCat("cannot read the shape of ", quoted));
  }
  return absl::OkStatus();
}

// A dataset's shape as messages show it, and its sizes as bounded by BoundExtent.
struct Extent {
  std::string shape;         // ShapeText(dims)
  size_t element_bytes = 0;  // 1-8, from CheckElementType
  uint64_t elements = 0;     // the product of the dims
  uint64_t bytes = 0;        // elements * element_bytes, uncompressed
};

// Counts the dataset's elements and bytes (overflow-checked) and bounds them and its events.
absl::Status BoundExtent(const std::string& path, const std::string& quoted,
                         const std::vector<hsize_t>& dims, const ShowerFileLimits& limits,
                         Extent* extent) {
  // Element and byte counts, overflow-checked, before anything is sized from them.
  extent->shape = ShapeText(dims);
  const std::string& shape = extent->shape;
  uint64_t elements = 1;
  for (hsize_t d : dims) {
    if (__builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements)) {
      return Invalid(path, absl::StrCat(quoted, " has shape ", shape,
                                        ": its element count overflows 64 bits"));
    }
  }
  if (dims[0] > static_cast<hsize_t>(limits.max_events)) {
    return Invalid(path, absl::StrCat(quoted, " has ", dims[0], " events; at most ",
                                      limits.max_events, " are accepted in one file"));
  }
  uint64_t bytes = 0;
  if (__builtin_mul_overflow(elements, static_cast<uint64_t>(extent->element_bytes), &bytes) ||
      bytes > static_cast<uint64_t>(limits.max_dataset_bytes)) {
    return Invalid(
        path, absl::StrCat(quoted, " has shape ", shape, ": more than ", limits.max_dataset_bytes,
                           " bytes uncompressed, the most accepted"));
  }
  extent->elements = elements;
  extent->bytes = bytes;
  return absl::OkStatus();
}

// Checks that a contiguous dataset's bytes are all stored, and end inside the file when its size
// is known.
absl::Status CheckContiguousStorage(const std::string& path, const std::string& quoted,
                                    const Dataset& ds, const Extent& extent, uint64_t stored,
                                    const std::string& missing, int64_t file_size) {
  const haddr_t offset = H5Dget_offset(ds.id.get());
  H5Eclear2(H5E_DEFAULT);
  if (stored < extent.bytes || offset == HADDR_UNDEF) return Invalid(path, missing);
  if (file_size >= 0 && (offset > static_cast<uint64_t>(file_size) ||
                         extent.bytes > static_cast<uint64_t>(file_size) - offset)) {
    return Invalid(path, absl::StrCat(quoted, " has shape ", extent.shape,
                                      ": its data would end past the end of the file ("
                                      "truncated file?)"));
  }
  return absl::OkStatus();
}

// Bounds a chunked dataset's chunk count and chunk size, then checks that every chunk is stored
// and that the compression ratio is within limits.
absl::Status CheckChunkedStorage(const std::string& path, const std::string& quoted,
                                 Dataset* dataset, hid_t dcpl, hid_t space, const Extent& extent,
                                 uint64_t stored, const ShowerFileLimits& limits,
                                 int64_t chunk_cache_bytes) {
  const Dataset& ds = *dataset;
  const int rank = static_cast<int>(ds.dims.size());
  const std::string& shape = extent.shape;
  std::vector<hsize_t> chunk(static_cast<size_t>(rank), 0);
  if (H5Pget_chunk(dcpl, rank, chunk.data()) != rank) {
    return Loss(path, absl::StrCat("cannot read the chunk shape of ", quoted));
  }
  uint64_t chunks = 1, chunk_bytes = extent.element_bytes;
  for (int i = 0; i < rank; ++i) {
    if (chunk[i] == 0) return Invalid(path, absl::StrCat(quoted, " has a zero chunk size"));
    const uint64_t along = ds.dims[i] / chunk[i] + (ds.dims[i] % chunk[i] != 0);
    if (__builtin_mul_overflow(chunks, along, &chunks) ||
        __builtin_mul_overflow(chunk_bytes, static_cast<uint64_t>(chunk[i]), &chunk_bytes) ||
        chunks > static_cast<uint64_t>(limits.max_chunks) ||
        chunk_bytes > static_cast<uint64_t>(limits.max_chunk_bytes)) {
      return Invalid(path,
                     absl::StrCat(quoted, " has shape ", shape, " in chunks of ", ShapeText(chunk),
                                  ": more than ", limits.max_chunks, " chunks or chunks over ",
                                  limits.max_chunk_bytes, " bytes, the most accepted"));
    }
  }
  hsize_t allocated = 0;
  if (H5Dget_num_chunks(ds.id.get(), space, &allocated) < 0) {
    return Loss(path, absl::StrCat("cannot count the stored chunks of ", quoted));
  }
  if (allocated != chunks) {
    return Invalid(path, absl::StrCat(quoted, " has shape ", shape, " but only ", allocated,
                                      " of its ", chunks,
                                      " chunks are stored in the file (never written or "
                                      "truncated)"));
  }
  if (stored == 0 || extent.bytes / stored > static_cast<uint64_t>(limits.max_compression_ratio)) {
    return Invalid(path, absl::StrCat(quoted, " has shape ", shape, " stored in ", stored,
                                      " bytes: a compression ratio over ",
                                      limits.max_compression_ratio, " is not accepted"));
  }
  ASSIGN_OR_RETURN(dataset->chunks,
                   ChunkReader::Create(path, quoted, ds.id.get(), dcpl, ds.dims, std::move(chunk),
                                       chunk_bytes, chunk_cache_bytes));
  return absl::OkStatus();
}

// Checks that the dataset's bytes are stored in the file itself (`dcpl` is its creation property
// list), with the checks of its storage layout.
absl::Status CheckStored(const std::string& path, const std::string& quoted, Dataset* dataset,
                         hid_t dcpl, hid_t space, const Extent& extent,
                         const ShowerFileLimits& limits, int64_t file_size,
                         int64_t chunk_cache_bytes) {
  const Dataset& ds = *dataset;
  if (H5Pget_external_count(dcpl) > 0) {
    return Invalid(path, absl::StrCat(quoted,
                                      " keeps its data in external files; only data stored in "
                                      "the file itself is accepted"));
  }
  const H5D_layout_t layout = H5Pget_layout(dcpl);
  const uint64_t stored = H5Dget_storage_size(ds.id.get());
  const std::string missing =
      absl::StrCat(quoted, " has shape ", extent.shape, " but its data is not stored in the file (",
                   stored, " of ", extent.bytes, " bytes present)");
  if (file_size >= 0 && stored > static_cast<uint64_t>(file_size)) {
    return Invalid(path, absl::StrCat(quoted, " claims ", stored,
                                      " stored bytes, more than the file's ", file_size));
  }
  switch (layout) {
    case H5D_COMPACT:
      if (stored < extent.bytes) return Invalid(path, missing);
      break;
    case H5D_CONTIGUOUS:
      RETURN_IF_ERROR(CheckContiguousStorage(path, quoted, ds, extent, stored, missing, file_size));
      break;
    case H5D_CHUNKED:
      RETURN_IF_ERROR(CheckChunkedStorage(path, quoted, dataset, dcpl, space, extent, stored,
                                          limits, chunk_cache_bytes));
      break;
    default:
      return Invalid(path, absl::StrCat(quoted,
                                        " is a virtual dataset (data mapped from other files); "
                                        "only data stored in the file itself is accepted"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Dataset> OpenDataset(const std::string& path, hid_t file, const char* name,
                                    const ShowerFileLimits& limits, int64_t file_size,
                                    int64_t chunk_cache_bytes) {
  const std::string quoted = absl::StrCat("dataset '", name, "'");
  RETURN_IF_ERROR(CheckDatasetLink(path, file, name, quoted));
  Dataset ds;
  ds.name = name;
  ds.id = Handle(H5Dopen2(file, name, H5P_DEFAULT), H5Dclose);
  if (!ds.id.ok()) return Loss(path, absl::StrCat("cannot open ", quoted));
  Handle type(H5Dget_type(ds.id.get()), H5Tclose);
  Extent extent;
  ASSIGN_OR_RETURN(extent.element_bytes, CheckElementType(path, name, quoted, type));
  Handle space(H5Dget_space(ds.id.get()), H5Sclose);
  RETURN_IF_ERROR(ReadShape(path, quoted, space, &ds.dims));
  RETURN_IF_ERROR(BoundExtent(path, quoted, ds.dims, limits, &extent));
  if (extent.elements == 0) return ds;
  // The bytes must be in the file: HDF5 reads unallocated storage as fill values, so a tiny file
  // could otherwise claim any number of events.
  Handle dcpl(H5Dget_create_plist(ds.id.get()), H5Pclose);
  if (!dcpl.ok()) return Loss(path, absl::StrCat("cannot read the storage of ", quoted));
  RETURN_IF_ERROR(CheckStored(path, quoted, &ds, dcpl.get(), space.get(), extent, limits, file_size,
                              chunk_cache_bytes));
  RETURN_IF_ERROR(CheckChunks(path, ds));
  return ds;
}

absl::Status ReadRows(const std::string& path, const Dataset& ds, int64_t first, int64_t count,
                      float* out) {
  if (count == 0) return absl::OkStatus();
  if (ds.chunks != nullptr) return ds.chunks->ReadRows(path, ds.id.get(), first, count, out);
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

absl::Status ShownStatus(const FileSource& source, absl::Status status) {
  if (status.ok() || source.display.empty() || source.path.empty() ||
      status.message().find(source.path) == absl::string_view::npos) {
    return status;
  }
  return absl::Status(status.code(),
                      absl::StrReplaceAll(status.message(), {{source.path, source.display}}));
}

namespace {

// Checks that `source` is an HDF5 file and sets up its file driver on `fapl`; sets *file_size
// when the size is known (an image, or a regular file).
absl::Status PrepareFileAccess(const FileSource& source, const std::string& path, hid_t fapl,
                               int64_t* file_size) {
  if (!source.image.empty()) {
    // HDF5's superblock signature sits at 0, 512, 1024, 2048, ...
    static constexpr char kSignature[] = "\x89HDF\r\n\x1a\n";
    bool signed_image = false;
    for (size_t at = 0; at + 8 <= source.image.size() && !signed_image; at = at ? 2 * at : 512) {
      signed_image = source.image.compare(at, 8, absl::string_view(kSignature, 8)) == 0;
    }
    if (!signed_image) return Invalid(path, "not an HDF5 file");
    *file_size = static_cast<int64_t>(source.image.size());
    if (UseCheckedFileDriver(fapl, source.image) < 0) {
      return Loss(path, "cannot hand the file's bytes to HDF5");
    }
  } else {
    struct stat st {};
    if (::stat(source.path.c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    }
    if (S_ISREG(st.st_mode)) *file_size = static_cast<int64_t>(st.st_size);
    const htri_t is_hdf5 = H5Fis_hdf5(source.path.c_str());
    if (is_hdf5 <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return Invalid(path, "not an HDF5 file");
    }
    if (UseCheckedFileDriver(fapl) < 0) return Loss(path, "cannot set up the HDF5 file driver");
  }
  return absl::OkStatus();
}

// Detects the file's layout from its datasets' names (setting f->layout and f->to_gev) and
// returns the name of its cell dataset.
absl::StatusOr<const char*> DetectLayout(const std::string& path, hid_t file, ShowerFile* f) {
  const char* cells_name = nullptr;
  if (HasLink(file, "showers") || HasLink(file, "incident_energies")) {
    if (!HasLink(file, "showers")) return Invalid(path, "CaloChallenge file without 'showers'");
    if (!HasLink(file, "incident_energies")) {
      return Invalid(path, "CaloChallenge file without 'incident_energies'");
    }
    f->layout = Layout::kCaloChallenge;
    f->to_gev = 1e-3;
    cells_name = "showers";
  } else if (HasLink(file, "ECAL")) {
    cells_name = "ECAL";
    if (HasLink(file, "target")) {
      f->layout = Layout::kFixedAngle3DGan;
    } else if (HasLink(file, "energy")) {
      f->layout = Layout::kVariableAngle3DGan;
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
  return cells_name;
}

// Checks the cell dataset's shape against f->layout, sets f->shape and bounds the cells per event.
absl::Status CheckCellShape(const std::string& path, const char* cells_name,
                            const ShowerFileLimits& limits, ShowerFile* f) {
  const std::vector<hsize_t>& d = f->cells.dims;
  if (f->layout == Layout::kCaloChallenge) {
    if (d.size() != 2) {
      return Invalid(path, absl::StrCat("dataset 'showers' has shape ", ShapeText(d),
                                        ", expected (N, voxels)"));
    }
    if (d[1] == 6480) {
      f->shape = {45, 16, 9};
    } else if (d[1] == 40500) {
      f->shape = {45, 50, 18};
    } else {
      return Invalid(path, absl::StrCat("dataset 'showers' has ", d[1],
                                        " voxels; supported are 6480 (CaloChallenge dataset 2, "
                                        "45x16x9) and 40500 (dataset 3, 45x50x18)"));
    }
  } else {
    const std::array<int64_t, 3> want = f->layout == Layout::kFixedAngle3DGan
                                            ? std::array<int64_t, 3>{25, 25, 25}
                                            : std::array<int64_t, 3>{51, 51, 25};
    if (d.size() != 4 || static_cast<int64_t>(d[1]) != want[0] ||
        static_cast<int64_t>(d[2]) != want[1] || static_cast<int64_t>(d[3]) != want[2]) {
      return Invalid(path, absl::StrCat("dataset 'ECAL' has shape ", ShapeText(d), ", expected (N,",
                                        want[0], ",", want[1], ",", want[2], ") for the ",
                                        LayoutName(f->layout), " layout"));
    }
    f->shape = want;
  }
  if (f->shape[0] * f->shape[1] * f->shape[2] > limits.max_cells_per_event) {
    return Invalid(
        path,
        absl::StrCat("dataset '", cells_name, "' has ", f->shape[0] * f->shape[1] * f->shape[2],
                     " cells per event; at most ", limits.max_cells_per_event, " are accepted"));
  }
  return absl::OkStatus();
}

// Reads and checks every event's energy (and, for the variable-angle layout, angle) into f.
absl::Status ReadConditions(const std::string& path, hid_t file, const ShowerFileLimits& limits,
                            int64_t file_size, ShowerFile* f) {
  if (f->layout == Layout::kCaloChallenge) {
    ASSIGN_OR_RETURN(f->energy_gev, ReadPerEvent(path, file, "incident_energies", f->events, 0,
                                                 f->to_gev, limits, file_size));
    RETURN_IF_ERROR(CheckEnergies(path, "incident_energies", f->energy_gev));
  } else if (f->layout == Layout::kFixedAngle3DGan) {
    ASSIGN_OR_RETURN(f->energy_gev,
                     ReadPerEvent(path, file, "target", f->events, 1, 1.0, limits, file_size));
    RETURN_IF_ERROR(CheckEnergies(path, "target", f->energy_gev));
  } else {
    ASSIGN_OR_RETURN(f->energy_gev,
                     ReadPerEvent(path, file, "energy", f->events, 0, 1.0, limits, file_size));
    RETURN_IF_ERROR(CheckEnergies(path, "energy", f->energy_gev));
    const char* theta_name = HasLink(file, "theta") ? "theta" : "mtheta";
    ASSIGN_OR_RETURN(f->theta_rad,
                     ReadPerEvent(path, file, theta_name, f->events, 0, 1.0, limits, file_size));
    for (size_t i = 0; i < f->theta_rad.size(); ++i) {
      if (!(f->theta_rad[i] >= 0.0f && f->theta_rad[i] <= 3.1416f)) {
        return Invalid(path, absl::StrCat("dataset '", theta_name, "' event ", i, " has angle ",
                                          f->theta_rad[i], ", expected radians in [0, pi]"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ShowerFile> OpenShowerFile(const FileSource& source, const ShowerFileLimits& limits,
                                          int64_t cells_chunk_cache_bytes) {
  const std::string& path = source.shown();
  int64_t file_size = -1;
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.ok()) return Loss(path, "cannot create HDF5 file access properties");
  RETURN_IF_ERROR(PrepareFileAccess(source, path, fapl.get(), &file_size));
  ShowerFile f;
  f.path = path;
  f.file = Handle(H5Fopen(source.path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  if (!f.file.ok()) return Loss(path, "cannot open the HDF5 file (truncated or corrupted?)");
  const hid_t file = f.file.get();
  // Before any link lookup in the root group (libhdf5 would follow a looping free list forever).
  const RootGroupCheck root = CheckRootGroup(file);
  if (!root.heap.empty()) return Invalid(path, root.heap);
  ASSIGN_OR_RETURN(const char* cells_name, DetectLayout(path, file, &f));
  ASSIGN_OR_RETURN(f.cells,
                   OpenDataset(path, file, cells_name, limits, file_size, cells_chunk_cache_bytes));
  RETURN_IF_ERROR(CheckCellShape(path, cells_name, limits, &f));
  RETURN_IF_ERROR(CheckBackedByStorage(path, f.cells));
  f.events = static_cast<int64_t>(f.cells.dims[0]);
  RETURN_IF_ERROR(ReadConditions(path, file, limits, file_size, &f));
  ASSIGN_OR_RETURN(f.particle_attribute, ReadParticleAttribute(path, file, root.attributes));
  return f;
}

absl::Status CheckCells(const ShowerFile& f, int64_t first, int64_t count, float* out) {
  const int64_t per_event = f.shape[0] * f.shape[1] * f.shape[2];
  for (int64_t i = 0; i < count * per_event; ++i) {
    const float v = out[i];
    if (!(v >= 0.0f) || !std::isfinite(v)) {
      return Invalid(f.path,
                     absl::StrCat("dataset '", f.cells.name, "' event ", first + i / per_event,
                                  " cell ", CellText(f.shape, i % per_event),
                                  std::isnan(v) ? " is NaN"
                                  : v < 0       ? absl::StrCat(" is negative (", v, ")")
                                                : " is infinite"));
    }
    if (f.to_gev != 1.0) out[i] = static_cast<float>(v * f.to_gev);
  }
  return absl::OkStatus();
}

absl::Status WriteParticleAttribute(const std::string& path, hid_t file,
                                    const std::string& particle) {
  Handle str_type(H5Tcopy(H5T_C_S1), H5Tclose);
  H5Tset_size(str_type.get(), std::max<size_t>(1, particle.size()));
  Handle scalar(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attr(H5Acreate2(file, "particle", str_type.get(), scalar.get(), H5P_DEFAULT, H5P_DEFAULT),
              H5Aclose);
  if (!attr.ok() || H5Awrite(attr.get(), str_type.get(), particle.c_str()) < 0) {
    return Loss(path, "cannot write the 'particle' attribute");
  }
  return absl::OkStatus();
}

}  // namespace gantry::showers::h5
