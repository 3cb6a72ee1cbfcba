// gantry's chunk reader (showers/chunk_reader.h) against libhdf5's H5Dread on valid files: every
// filter combination gantry accepts, element types of other sizes and byte orders, edge chunks
// along every axis, any row range, with and without its cache, from several threads; and a chunk
// whose Fletcher32 checksum fails.
#include "showers/chunk_reader.h"

#include <gtest/gtest.h>
#include <hdf5.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "showers/hdf5_common.h"
#include "tests/support/temp_dir.h"

namespace gantry::showers::h5 {
namespace {

struct Filters {
  const char* name;
  bool shuffle, deflate, fletcher32;
};
constexpr Filters kFilters[] = {
    {"None", false, false, false},         {"Deflate", false, true, false},
    {"ShuffleDeflate", true, true, false}, {"ShuffleDeflateFletcher32", true, true, true},
    {"Fletcher32", false, false, true},    {"ShuffleFletcher32", true, false, true}};

struct Type {
  const char* name;
  hid_t file, memory;  // the element type stored and the one written from
  double lo, hi;       // values drawn (integers for integer types)
  bool integer;
};
const Type kTypes[] = {{"F32LE", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, -1e3, 1e3, false},
                       {"F32BE", H5T_IEEE_F32BE, H5T_NATIVE_FLOAT, -1e3, 1e3, false},
                       {"F64BE", H5T_IEEE_F64BE, H5T_NATIVE_DOUBLE, -1e30, 1e30, false},
                       {"I16LE", H5T_STD_I16LE, H5T_NATIVE_DOUBLE, -30000, 30000, true},
                       {"U8", H5T_STD_U8LE, H5T_NATIVE_DOUBLE, 0, 255, true}};

// A dataset "data" of `dims` in chunks of `chunk` with random values, written by libhdf5.
void WriteDataset(const std::string& path, const Type& type, const Filters& filters,
                  const std::vector<hsize_t>& dims, const std::vector<hsize_t>& chunk) {
  LibraryLock lock;
  size_t n = 1;
  for (hsize_t d : dims) n *= d;
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> draw(type.lo, type.hi);
  std::vector<double> values(n);
  for (double& v : values)
    v = type.integer ? static_cast<double>(static_cast<int>(draw(rng))) : draw(rng);
  std::vector<float> floats(values.begin(), values.end());
  const void* data =
      type.memory == H5T_NATIVE_FLOAT ? static_cast<const void*>(floats.data()) : values.data();
  Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT), H5Fclose);
  Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), H5Sclose);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  ASSERT_GE(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()), 0);
  if (filters.shuffle) ASSERT_GE(H5Pset_shuffle(dcpl.get()), 0);
  if (filters.deflate) ASSERT_GE(H5Pset_deflate(dcpl.get(), 4), 0);
  if (filters.fletcher32) ASSERT_GE(H5Pset_fletcher32(dcpl.get()), 0);
  Handle ds(
      H5Dcreate2(file.get(), "data", type.file, space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
      H5Dclose);
  ASSERT_TRUE(ds.ok());
  ASSERT_GE(H5Dwrite(ds.get(), type.memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), 0);
}

// An opened file and its dataset "data", as gantry opens it.
struct Opened {
  Handle file;
  Dataset ds;
  size_t row = 1;  // values per row
};

Opened Open(const std::string& path, int64_t cache_bytes) {
  LibraryLock lock;
  Opened o;
  o.file = Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
  absl::StatusOr<Dataset> ds =
      OpenDataset(path, o.file.get(), "data", ShowerFileLimits{}, -1, cache_bytes);
  EXPECT_TRUE(ds.ok()) << ds.status();
  if (ds.ok()) o.ds = std::move(*ds);
  for (size_t i = 1; i < o.ds.dims.size(); ++i) o.row *= o.ds.dims[i];
  return o;
}

// Rows [first, first + count) through libhdf5's own chunk reading (a valid file: safe).
std::vector<float> ByLibhdf5(const Opened& o, int64_t first, int64_t count) {
  LibraryLock lock;
  std::vector<float> out(static_cast<size_t>(count) * o.row);
  Handle space(H5Dget_space(o.ds.id.get()), H5Sclose);
  std::vector<hsize_t> start(o.ds.dims.size(), 0), extent = o.ds.dims;
  start[0] = static_cast<hsize_t>(first);
  extent[0] = static_cast<hsize_t>(count);
  H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr, extent.data(), nullptr);
  Handle memory(H5Screate_simple(static_cast<int>(extent.size()), extent.data(), nullptr),
                H5Sclose);
  EXPECT_GE(
      H5Dread(o.ds.id.get(), H5T_NATIVE_FLOAT, memory.get(), space.get(), H5P_DEFAULT, out.data()),
      0);
  return out;
}

absl::StatusOr<std::vector<float>> ByGantry(const Opened& o, int64_t first, int64_t count) {
  LibraryLock lock;
  std::vector<float> out(static_cast<size_t>(count) * o.row, -12345.0f);
  absl::Status s = ReadRows("file.h5", o.ds, first, count, out.data());
  if (!s.ok()) return s;
  return out;
}

class ChunkReaderTest : public ::testing::TestWithParam<std::pair<Filters, Type>> {};

TEST_P(ChunkReaderTest, ReadsEveryRowRangeAsLibhdf5Does) {
  const auto& [filters, type] = GetParam();
  testing::TempDir dir;
  const std::string path = dir.File("data.h5");
  // Edge chunks along every axis: 37 = 4 x 8 + 5, 5 = 2 x 2 + 1, 7 = 2 x 3 + 1.
  WriteDataset(path, type, filters, {37, 5, 7}, {8, 2, 3});
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{0, 37}, {5, 1},   {7, 2},  {8, 8},
                                                           {30, 7}, {15, 20}, {36, 1}, {0, 1}};
  for (int64_t cache : {int64_t{0}, int64_t{1} << 20}) {
    Opened o = Open(path, cache);
    ASSERT_NE(o.ds.chunks, nullptr);
    for (int pass = 0; pass < 2; ++pass) {  // the second from the cache, where there is one
      for (const auto& [first, count] : ranges) {
        absl::StatusOr<std::vector<float>> got = ByGantry(o, first, count);
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_EQ(*got, ByLibhdf5(o, first, count))
            << "rows " << first << "+" << count << ", cache " << cache << ", pass " << pass;
      }
    }
  }
}

std::vector<std::pair<Filters, Type>> AllCombinations() {
  std::vector<std::pair<Filters, Type>> all;
  for (const Filters& f : kFilters) {
    for (const Type& t : kTypes) all.push_back({f, t});
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(FiltersAndTypes, ChunkReaderTest, ::testing::ValuesIn(AllCombinations()),
                         [](const ::testing::TestParamInfo<std::pair<Filters, Type>>& info) {
                           return std::string(info.param.first.name) + "_" + info.param.second.name;
                         });

TEST(ChunkReaderRankTest, ReadsRankOneAndRankFourDatasets) {
  testing::TempDir dir;
  const Filters filters = kFilters[3];  // shuffle, deflate, fletcher32
  const Type& type = kTypes[0];
  for (const auto& [dims, chunk] :
       std::vector<std::pair<std::vector<hsize_t>, std::vector<hsize_t>>>{
           {{101}, {16}}, {{9, 4, 3, 5}, {2, 3, 2, 5}}}) {
    const std::string path = dir.File("rank" + std::to_string(dims.size()) + ".h5");
    WriteDataset(path, type, filters, dims, chunk);
    Opened o = Open(path, 1 << 20);
    const int64_t rows = static_cast<int64_t>(dims[0]);
    for (int64_t first = 0; first < rows; first += 3) {
      for (int64_t count : {int64_t{1}, rows - first}) {
        absl::StatusOr<std::vector<float>> got = ByGantry(o, first, count);
        ASSERT_TRUE(got.ok()) << got.status();
        EXPECT_EQ(*got, ByLibhdf5(o, first, count)) << "rank " << dims.size() << " rows " << first;
      }
    }
  }
}

TEST(ChunkReaderThreadsTest, ThreadsSharingASmallCacheReadWhatLibhdf5Reads) {
  testing::TempDir dir;
  const std::string path = dir.File("threads.h5");
  WriteDataset(path, kTypes[0], kFilters[2], {200, 6, 5}, {4, 6, 5});
  Opened o = Open(path, 3 * 4 * 6 * 5 * sizeof(float));  // three of its 50 chunks
  const std::vector<float> all = ByLibhdf5(o, 0, 200);
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 300; ++i) {
        const int64_t first = std::uniform_int_distribution<int64_t>(0, 199)(rng);
        const int64_t count = std::uniform_int_distribution<int64_t>(1, 200 - first)(rng);
        absl::StatusOr<std::vector<float>> got = ByGantry(o, first, count);
        if (!got.ok() || !std::equal(got->begin(), got->end(), all.begin() + first * o.row)) {
          ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

TEST(ChunkReaderChecksumTest, AChunkFailingItsChecksumIsDataLossNamingIt) {
  testing::TempDir dir;
  const std::string path = dir.File("checksum.h5");
  WriteDataset(path, kTypes[0], kFilters[4], {16, 5, 7}, {8, 5, 7});  // fletcher32 alone
  haddr_t address = HADDR_UNDEF;
  {
    Opened o = Open(path, 0);
    LibraryLock lock;
    const hsize_t offset[3] = {8, 0, 0};
    unsigned mask = 0;
    hsize_t stored = 0;
    ASSERT_GE(H5Dget_chunk_info_by_coord(o.ds.id.get(), offset, &mask, &address, &stored), 0);
    ASSERT_EQ(stored, 8 * 5 * 7 * sizeof(float) + 4);
  }
  // One bit of the second chunk's data flipped on disk.
  std::FILE* f = std::fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  std::fseek(f, static_cast<long>(address + 100), SEEK_SET);
  const int byte = std::fgetc(f);
  std::fseek(f, static_cast<long>(address + 100), SEEK_SET);
  std::fputc(byte ^ 0x10, f);
  std::fclose(f);

  Opened o = Open(path, 0);
  EXPECT_TRUE(ByGantry(o, 0, 8).ok()) << "the first chunk is intact";
  absl::StatusOr<std::vector<float>> damaged = ByGantry(o, 7, 2);
  ASSERT_FALSE(damaged.ok());
  EXPECT_EQ(damaged.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(damaged.status().message().find("chunk (8,0,0) of dataset 'data'"), std::string::npos)
      << damaged.status();
  EXPECT_NE(damaged.status().message().find("Fletcher32 checksum"), std::string::npos);
  // libhdf5 agrees that the flipped bit is under the checksum.
  LibraryLock lock;
  std::vector<float> out(16 * 5 * 7);
  EXPECT_LT(H5Dread(o.ds.id.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), 0);
  H5Eclear2(H5E_DEFAULT);
}

}  // namespace
}  // namespace gantry::showers::h5
