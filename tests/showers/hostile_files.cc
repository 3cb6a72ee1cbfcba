// Every file is built with the HDF5 C API directly, so it can say things the data library's writer
// never would (chunked datasets never written, dims of 2^36 events, links to other files).
#include "tests/showers/hostile_files.h"

#include <hdf5.h>
#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include "showers/hdf5_io.h"
#include "showers/toy_mc.h"

namespace gantry::testing {
namespace {

void Check(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("writing a hostile file failed: " + what);
}

hid_t Create(const std::string& path) {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
  Check(f >= 0, path);
  return f;
}

// A dataset of `dims` and `type`; chunked with `chunk` when given (never written), contiguous
// otherwise; written with zeros when `write` (contiguous only).
void AddDataset(hid_t file, const char* name, std::vector<hsize_t> dims, hid_t type,
                std::vector<hsize_t> chunk = {}, bool write = false) {
  const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  if (!chunk.empty()) H5Pset_chunk(dcpl, static_cast<int>(chunk.size()), chunk.data());
  const hid_t ds = H5Dcreate2(file, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  Check(ds >= 0, name);
  if (write) {
    hsize_t n = 1;
    for (hsize_t d : dims) n *= d;
    std::vector<double> zeros(n, 0.0);
    for (size_t i = 0; i < zeros.size(); ++i) zeros[i] = 1.0 + static_cast<double>(i % 3);
    Check(H5Dwrite(ds, H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, zeros.data()) >= 0, name);
  }
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(space);
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

uint64_t LoadLe(const std::string& bytes, size_t at, int width) {
  Check(at + width <= bytes.size(), "a field inside the file");
  uint64_t v = 0;
  for (int i = width - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[at + i]);
  return v;
}

// Stores `v` little-endian in bytes [at, at + width).
void StoreLe(std::string& bytes, size_t at, uint64_t v, int width) {
  Check(at + width <= bytes.size(), "a field inside the file");
  for (int i = 0; i < width; ++i) bytes[at + i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

// Calls `edit(bytes, at)` on the root group's symbol-table message (`at`: its 8-byte message
// header; B-tree and local heap addresses follow). Expects the layout WriteShowerFile writes:
// superblock version 0 (root object header address at byte 64), a version 1 object header.
std::string EditRootSymbolTable(std::string bytes,
                                const std::function<void(std::string&, size_t)>& edit) {
  Check(bytes.size() > 96 && bytes[8] == 0, "superblock version 0");
  const size_t header = LoadLe(bytes, 64, 8);
  Check(LoadLe(bytes, header, 1) == 1, "object header version 1");
  // Message blocks: the header's own (after its 16-byte prefix), then continuation blocks.
  std::vector<std::pair<size_t, size_t>> blocks = {{header + 16, LoadLe(bytes, header + 8, 4)}};
  for (size_t b = 0; b < blocks.size() && b < 16; ++b) {
    for (size_t at = blocks[b].first; at + 8 <= blocks[b].first + blocks[b].second;) {
      const uint64_t type = LoadLe(bytes, at, 2), size = LoadLe(bytes, at + 2, 2);
      if (type == 0x10) blocks.emplace_back(LoadLe(bytes, at + 8, 8), LoadLe(bytes, at + 16, 8));
      if (type == 0x11) {
        Check(size >= 16, "a symbol-table message of 16 bytes");
        edit(bytes, at);
        return bytes;
      }
      at += 8 + size;
    }
  }
  Check(false, "the root group has a symbol-table message");
  return bytes;
}

// The root group's symbol-table message pointing its local heap at HADDR_UNDEF (all ones). In
// libhdf5 1.10.8 that address "adjoins" the empty metadata accumulator of sec2 and core files and
// the lookup copies from a null buffer.
std::string WithUndefinedHeapAddress(std::string bytes) {
  return EditRootSymbolTable(
      std::move(bytes), [](std::string& b, size_t at) { b.replace(at + 8 + 8, 8, 8, '\xff'); });
}

// The root group's symbol-table message claiming a size of 0 (libhdf5 1.10.8 still decodes its
// addresses) and the superblock's cached copy of the heap address pointing past the end of the
// file: only the message leads to the heap (found by hdf5_inspect_fuzzer with a looping heap).
std::string WithSymbolTableOfSizeZero(std::string bytes) {
  // The superblock's cached heap address, within the 64 KiB past the end the checked driver allows.
  StoreLe(bytes, 88, bytes.size() + 60000, 8);
  return EditRootSymbolTable(std::move(bytes),
                             [](std::string& b, size_t at) { StoreLe(b, at + 2, 0, 2); });
}

// The same file with its root group's "particle" attribute (a fixed-length string in a version 1
// attribute message, as WriteShowerFile writes it) claiming a string of `size` bytes, far more
// than its message holds. libhdf5 1.10.8 copies the claimed bytes from past the end of the
// object header's buffer when any H5A function decodes the message.
std::string WithOverrunningAttribute(std::string bytes, uint32_t size) {
  const size_t name = bytes.find(std::string("particle\0", 9));
  Check(name != std::string::npos && name >= 8 && bytes[name - 8] == 1, "a version 1 attribute");
  const size_t type = name + 16;  // the name, padded to 8 bytes
  Check((bytes[type] & 0x0F) == 3, "a fixed-length string type");
  StoreLe(bytes, type + 4, size, 4);
  return bytes;
}

// The same file with its root group's local heap (the link names) given a free list whose one
// block names itself as the next: libhdf5 1.10.8 follows such a list without end, allocating.
std::string WithLoopingHeapFreeList(std::string bytes) {
  const size_t heap = bytes.find("HEAP");
  Check(heap != std::string::npos && bytes[heap + 4] == 0, "a version 0 local heap");
  const uint64_t data_size = LoadLe(bytes, heap + 8, 8), data = LoadLe(bytes, heap + 24, 8);
  Check(data_size >= 32 && data + data_size <= bytes.size(), "a local heap of 32 bytes or more");
  StoreLe(bytes, heap + 16, 16, 8);  // the free list starts at offset 16 of the data...
  StoreLe(bytes, data + 16, 16, 8);  // ...whose block's next is itself
  StoreLe(bytes, data + 24, 16, 8);  // (16 bytes long)
  return bytes;
}

// A 3DGAN file of 2 events whose ECAL is chunked one event per chunk with `filters` (deflate when
// `deflate`), each chunk written raw through H5Dwrite_chunk as `chunk_bytes` with `mask`.
void AddRawChunks(const std::string& path, bool deflate, unsigned mask,
                  const std::string& chunk_bytes) {
  const hid_t f = Create(path);
  const hsize_t dims[4] = {2, 25, 25, 25}, chunk[4] = {1, 25, 25, 25};
  const hid_t space = H5Screate_simple(4, dims, nullptr);
  const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
  H5Pset_chunk(dcpl, 4, chunk);
  if (deflate) H5Pset_deflate(dcpl, 6);
  const hid_t ds = H5Dcreate2(f, "ECAL", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
  Check(ds >= 0, "ECAL");
  for (hsize_t event = 0; event < 2; ++event) {
    const hsize_t offset[4] = {event, 0, 0, 0};
    Check(
        H5Dwrite_chunk(ds, H5P_DEFAULT, mask, offset, chunk_bytes.size(), chunk_bytes.data()) >= 0,
        "a raw chunk");
  }
  H5Dclose(ds);
  H5Pclose(dcpl);
  H5Sclose(space);
  AddDataset(f, "target", {2, 4}, H5T_IEEE_F32LE, {}, true);
  H5Fclose(f);
}

// `n` bytes (a repeating pattern of 251) as the zlib stream HDF5's deflate filter writes.
std::string Deflated(size_t n) {
  std::string zeros(n, '\0');
  for (size_t i = 0; i < n; ++i) zeros[i] = static_cast<char>(i % 251 * 7);
  uLongf size = compressBound(n);
  std::string out(size, '\0');
  Check(compress2(reinterpret_cast<Bytef*>(out.data()), &size,
                  reinterpret_cast<const Bytef*>(zeros.data()), n, 6) == Z_OK,
        "deflate");
  out.resize(size);
  return out;
}

void WriteAll(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
}

}  // namespace

std::vector<HostileFile> WriteHostileFiles(const std::string& dir) {
  std::vector<HostileFile> files;
  auto add = [&](const std::string& name, const std::string& about, const std::string& fragment,
                 absl::StatusCode code = absl::StatusCode::kInvalidArgument) {
    files.push_back({name, dir + "/" + name, about, code, fragment});
    return files.back().path;
  };
  const hsize_t kHuge = hsize_t{1} << 36;
  {
    const hid_t f =
        Create(add("huge_chunked.h5", "chunked, never written, claiming 2^36 events of 25x25x25",
                   "68719476736 events"));
    AddDataset(f, "ECAL", {kHuge, 25, 25, 25}, H5T_IEEE_F32LE, {1, 25, 25, 25});
    AddDataset(f, "target", {kHuge, 4}, H5T_IEEE_F32LE, {1024, 4});
    H5Fclose(f);
  }
  {
    const hid_t f =
        Create(add("chunked_never_written.h5", "chunked, never written, claiming 1,000,000 events",
                   "chunks are stored"));
    AddDataset(f, "ECAL", {1000000, 25, 25, 25}, H5T_IEEE_F32LE, {1, 25, 25, 25});
    AddDataset(f, "target", {1000000, 4}, H5T_IEEE_F32LE, {1024, 4});
    H5Fclose(f);
  }
  {
    const hid_t f =
        Create(add("contiguous_unallocated.h5",
                   "contiguous, never written, claiming 100,000 events", "not stored in the file"));
    AddDataset(f, "ECAL", {100000, 25, 25, 25}, H5T_IEEE_F32LE);
    AddDataset(f, "target", {100000, 4}, H5T_IEEE_F32LE);
    H5Fclose(f);
  }
  {
    const hid_t f = Create(add("huge_chunks.h5", "chunks of 1 GiB each", "chunks over"));
    AddDataset(f, "ECAL", {16384, 25, 25, 25}, H5T_IEEE_F32LE, {16384, 25, 25, 25});
    AddDataset(f, "target", {16384, 4}, H5T_IEEE_F32LE, {1024, 4});
    H5Fclose(f);
  }
  {
    const hid_t f = Create(
        add("overflowing_dims.h5", "dims whose product overflows 64 bits", "overflows 64 bits"));
    AddDataset(f, "ECAL", {hsize_t{1} << 50, 1 << 10, 1 << 10, 1 << 10}, H5T_IEEE_F32LE,
               {1, 1, 1, 1});
    AddDataset(f, "target", {4, 4}, H5T_IEEE_F32LE);
    H5Fclose(f);
  }
  {
    const hid_t f = Create(add("wrong_rank.h5", "ECAL of rank 3", "expected (N,25,25,25)"));
    AddDataset(f, "ECAL", {10, 25, 25}, H5T_IEEE_F32LE, {}, true);
    AddDataset(f, "target", {10, 4}, H5T_IEEE_F32LE, {}, true);
    H5Fclose(f);
  }
  {
    const hid_t f = Create(add("rank_too_high.h5", "ECAL of rank 8", "rank 8"));
    AddDataset(f, "ECAL", {1, 1, 1, 1, 1, 1, 1, 1}, H5T_IEEE_F32LE, {}, true);
    AddDataset(f, "target", {1, 4}, H5T_IEEE_F32LE, {}, true);
    H5Fclose(f);
  }
  {
    const hid_t f = Create(add("zero_events.h5", "ECAL with no events", "no events"));
    AddDataset(f, "ECAL", {0, 25, 25, 25}, H5T_IEEE_F32LE);
    AddDataset(f, "target", {0, 4}, H5T_IEEE_F32LE);
    H5Fclose(f);
  }
  {
    const hid_t f = Create(add("long_double.h5", "16-byte float elements", "16-byte elements"));
    AddDataset(f, "ECAL", {2, 25, 25, 25}, H5T_NATIVE_LDOUBLE);
    AddDataset(f, "target", {2, 4}, H5T_IEEE_F32LE, {}, true);
    H5Fclose(f);
  }
  {
    const hid_t f = Create(add("compound.h5", "a compound element type", "not numeric"));
    const hid_t type = H5Tcreate(H5T_COMPOUND, 8);
    H5Tinsert(type, "a", 0, H5T_NATIVE_FLOAT);
    H5Tinsert(type, "b", 4, H5T_NATIVE_FLOAT);
    AddDataset(f, "ECAL", {2, 25, 25, 25}, type);
    H5Tclose(type);
    AddDataset(f, "target", {2, 4}, H5T_IEEE_F32LE, {}, true);
    H5Fclose(f);
  }
  {
    const hid_t f = Create(
        add("too_many_columns.h5", "target with 100 columns per event", "100 columns per event"));
    AddDataset(f, "ECAL", {2, 25, 25, 25}, H5T_IEEE_F32LE, {}, true);
    AddDataset(f, "target", {2, 100}, H5T_IEEE_F32LE, {}, true);
    H5Fclose(f);
  }
  {
    const hid_t f =
        Create(add("nested_groups.h5", "ECAL is a group nested 64 deep", "is not a dataset"));
    hid_t g = H5Gcreate2(f, "ECAL", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    std::vector<hid_t> groups{g};
    for (int i = 0; i < 64; ++i) {
      g = H5Gcreate2(g, "g", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      groups.push_back(g);
    }
    for (auto it = groups.rbegin(); it != groups.rend(); ++it) H5Gclose(*it);
    AddDataset(f, "target", {2, 4}, H5T_IEEE_F32LE, {}, true);
    H5Fclose(f);
  }
  {
    const hid_t f = Create(add("external_link.h5", "ECAL is a link into another file",
                               "external or user-defined link"));
    Check(H5Lcreate_external("/etc/passwd", "/ECAL", f, "ECAL", H5P_DEFAULT, H5P_DEFAULT) >= 0,
          "external link");
    AddDataset(f, "target", {2, 4}, H5T_IEEE_F32LE, {}, true);
    H5Fclose(f);
  }
  {
    const hid_t f =
        Create(add("external_storage.h5", "ECAL's raw data is /etc/passwd", "external files"));
    const hsize_t dims[4] = {2, 25, 25, 25};
    const hid_t space = H5Screate_simple(4, dims, nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_external(dcpl, "/etc/passwd", 0, 2 * 25 * 25 * 25 * 4);
    const hid_t ds = H5Dcreate2(f, "ECAL", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    Check(ds >= 0, "external storage");
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
    AddDataset(f, "target", {2, 4}, H5T_IEEE_F32LE, {}, true);
    H5Fclose(f);
  }
  {
    const hid_t f = Create(add("soft_link_loop.h5", "ECAL is a soft link to itself",
                               "cannot open dataset 'ECAL'", absl::StatusCode::kDataLoss));
    H5Lcreate_soft("/ECAL", f, "ECAL", H5P_DEFAULT, H5P_DEFAULT);
    AddDataset(f, "target", {2, 4}, H5T_IEEE_F32LE, {}, true);
    H5Fclose(f);
  }
  // A real, uncompressed file (its cells contiguous), then damaged.
  showers::ToyMcConfig config;
  config.events = 40;
  config.seed = 3;
  const showers::ShowerSet set = *showers::SimulateToyMc(config);
  showers::WriteOptions plain;
  plain.gzip_level = 0;
  const std::string good = dir + "/hostile_source.h5";
  Check(showers::WriteShowerFile(good, set, plain).ok(), good);
  const std::string bytes = ReadAll(good);
  WriteAll(add("truncated.h5", "a valid file cut at 60%", "", absl::StatusCode::kDataLoss),
           bytes.substr(0, bytes.size() * 6 / 10));
  {
    std::mt19937_64 rng(12);
    std::string garbage = bytes.substr(0, 8);  // the HDF5 signature, then noise
    while (garbage.size() < 4096) garbage.push_back(static_cast<char>(rng()));
    WriteAll(add("garbage.h5", "the HDF5 signature followed by random bytes", "",
                 absl::StatusCode::kDataLoss),
             garbage);
  }
  WriteAll(add("undefined_heap_address.h5",
               "a valid file whose root group's local heap is at the undefined address",
               "no known layout"),
           WithUndefinedHeapAddress(bytes));
  WriteAll(add("heap_free_list_loop.h5",
               "a valid file whose root group's name heap has a free list that loops",
               "free list that loops"),
           WithLoopingHeapFreeList(bytes));
  WriteAll(add("symbol_table_of_size_zero_heap_loop.h5",
               "a valid file whose root symbol-table message claims size 0, its heap's free list "
               "looping, the superblock's cached heap address past the end",
               "free list that loops"),
           WithSymbolTableOfSizeZero(WithLoopingHeapFreeList(bytes)));
  WriteAll(add("attribute_overrunning_its_message.h5",
               "a valid file whose particle attribute claims a 4096-byte string",
               "attribute 'particle' of the root group claims a value of 4096 bytes"),
           WithOverrunningAttribute(bytes, 4096));
  // Chunks are checked when first read: the reader opens these and refuses their first read.
  constexpr size_t kChunkBytes = 25 * 25 * 25 * 4;
  AddRawChunks(add("chunk_skipping_its_filters.h5",
                   "deflated chunks stored raw and short, their filter mask skipping deflate",
                   "skips some of its filters"),
               true, 1, std::string(600, '\1'));
  files.back().refused_when_read = true;
  AddRawChunks(add("short_deflate_stream.h5", "chunks whose deflate streams hold 1000 bytes",
                   "inflates to 1000 bytes, not its 62500", absl::StatusCode::kDataLoss),
               true, 0, Deflated(1000));
  files.back().refused_when_read = true;
  AddRawChunks(add("long_deflate_stream.h5", "chunks whose deflate streams hold 2 chunks' bytes",
                   "inflates to more than", absl::StatusCode::kDataLoss),
               true, 0, Deflated(2 * kChunkBytes));
  files.back().refused_when_read = true;
  AddRawChunks(
      add("unfiltered_chunk_stored_short.h5", "unfiltered chunks of 600 bytes", "stores 600 bytes"),
      false, 0, std::string(600, '\1'));
  files.back().refused_when_read = true;
  {
    const hid_t f = Create(add("scaleoffset_filter.h5", "ECAL filtered with scale-offset",
                               "filtered with HDF5 filter 6"));
    const hsize_t dims[4] = {2, 25, 25, 25}, chunk[4] = {1, 25, 25, 25};
    const hid_t space = H5Screate_simple(4, dims, nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 4, chunk);
    H5Pset_scaleoffset(dcpl, H5Z_SO_FLOAT_DSCALE, 2);
    const hid_t ds = H5Dcreate2(f, "ECAL", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    Check(ds >= 0, "scale-offset ECAL");
    const std::vector<float> ones(2 * 25 * 25 * 25, 1.0f);
    Check(H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, ones.data()) >= 0,
          "scale-offset ECAL");
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
    AddDataset(f, "target", {2, 4}, H5T_IEEE_F32LE, {}, true);
    H5Fclose(f);
  }
  WriteAll(add("not_hdf5.h5", "text", "not an HDF5 file"), "just some text\n");
  return files;
}

}  // namespace gantry::testing
