// Tests of ShowerOutput: GenerateChunk streams into HDF5 (both 3DGAN layouts) and .npy files under
// <path>.part, renamed only when complete; malformed or short streams are refused.
#include "clients/cli/shower_output.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <fstream>
#include <sstream>

#include "clients/cli/npy_writer.h"
#include "showers/hdf5_io.h"
#include "tests/support/temp_dir.h"
#include "tests/support/files.h"

namespace gantry::cli {
namespace {

using ::testing::HasSubstr;

using ::gantry::testing::Exists;

// A chunk of n showers on grid (x, y, z) starting at `offset`: cell values encode (shower, cell)
// so that a misplaced block shows up when read back.
v1::GenerateChunk Chunk(int64_t offset, int64_t n, int64_t x, int64_t y, int64_t z) {
  v1::GenerateChunk chunk;
  const int64_t per = x * y * z;
  std::vector<float> cells(static_cast<size_t>(n * per));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t c = 0; c < per; ++c) cells[i * per + c] = 0.001f * (offset + i) + 1e-7f * c;
    v1::Condition* condition = chunk.add_conditions();
    condition->set_energy_gev(10.0 * (offset + i + 1));
    condition->set_theta_rad(1.5 + 0.01 * (offset + i));
  }
  chunk.set_showers(std::string(reinterpret_cast<const char*>(cells.data()), cells.size() * 4));
  for (int64_t d : {n, x, y, z}) chunk.add_shape(d);
  chunk.set_offset(offset);
  chunk.set_model_ref("m:1");
  return chunk;
}

TEST(ShowerOutputTest, FormatFromExtension) {
  EXPECT_EQ(ShowerOutput::FormatForPath("a.npy"), ShowerOutput::Format::kNpy);
  EXPECT_EQ(ShowerOutput::FormatForPath("a.h5"), ShowerOutput::Format::kHdf5);
  EXPECT_EQ(ShowerOutput::FormatForPath("a.hdf5"), ShowerOutput::Format::kHdf5);
}

TEST(ShowerOutputTest, FixedAngleHdf5WrittenUnderPartThenRenamed) {
  gantry::testing::TempDir dir;
  const std::string path = dir.File("gen.h5");
  auto output = ShowerOutput::Create(path, "Ele", 5);
  ASSERT_TRUE(output.ok()) << output.status();
  EXPECT_TRUE(Exists(path + ".part"));
  ASSERT_TRUE((*output)->Append(Chunk(0, 2, 25, 25, 25)).ok());
  ASSERT_TRUE((*output)->Append(Chunk(2, 3, 25, 25, 25)).ok());
  EXPECT_FALSE(Exists(path));  // not before Finish
  ASSERT_TRUE((*output)->Finish().ok());
  EXPECT_TRUE(Exists(path));
  EXPECT_FALSE(Exists(path + ".part"));
  absl::StatusOr<showers::ShowerSet> read = showers::ReadShowerFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->layout, showers::Layout::kFixedAngle3DGan);
  ASSERT_EQ(read->events(), 5);
  for (int64_t i = 0; i < 5; ++i) {
    EXPECT_FLOAT_EQ(read->energy_gev[i], 10.0f * (i + 1));
    EXPECT_FLOAT_EQ(read->event(i)[100], 0.001f * i + 1e-7f * 100);
  }
}

TEST(ShowerOutputTest, VariableAngleHdf5KeepsAngles) {
  gantry::testing::TempDir dir;
  const std::string path = dir.File("gen51.hdf5");
  auto output = ShowerOutput::Create(path, "ChPi", 3);
  ASSERT_TRUE(output.ok());
  ASSERT_TRUE((*output)->Append(Chunk(0, 3, 51, 51, 25)).ok());
  ASSERT_TRUE((*output)->Finish().ok());
  absl::StatusOr<showers::ShowerSet> read = showers::ReadShowerFile(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->layout, showers::Layout::kVariableAngle3DGan);
  EXPECT_EQ(read->particle, "ChPi");
  ASSERT_EQ(read->theta_rad.size(), 3u);
  EXPECT_FLOAT_EQ(read->theta_rad[2], 1.52f);
}

TEST(ShowerOutputTest, NpyStreamsHeaderThenData) {
  gantry::testing::TempDir dir;
  const std::string path = dir.File("gen.npy");
  auto output = ShowerOutput::Create(path, "Ele", 3);
  ASSERT_TRUE(output.ok());
  const v1::GenerateChunk a = Chunk(0, 1, 4, 3, 2), b = Chunk(1, 2, 4, 3, 2);
  ASSERT_TRUE((*output)->Append(a).ok());
  ASSERT_TRUE((*output)->Append(b).ok());
  ASSERT_TRUE((*output)->Finish().ok());
  std::ifstream in(path, std::ios::binary);
  std::stringstream content;
  content << in.rdbuf();
  EXPECT_EQ(content.str(), NpyHeader({3, 4, 3, 2}) + a.showers() + b.showers());
}

TEST(ShowerOutputTest, ShortStreamLeavesOnlyThePartFile) {
  gantry::testing::TempDir dir;
  const std::string path = dir.File("short.h5");
  auto output = ShowerOutput::Create(path, "Ele", 4);
  ASSERT_TRUE(output.ok());
  ASSERT_TRUE((*output)->Append(Chunk(0, 2, 25, 25, 25)).ok());
  absl::Status finished = (*output)->Finish();
  EXPECT_EQ(finished.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(finished.message(), HasSubstr("2 of 4"));
  EXPECT_FALSE(Exists(path));
  output->reset();
  EXPECT_TRUE(Exists(path + ".part"));  // kept for inspection: it holds showers
}

TEST(ShowerOutputTest, FailureBeforeAnyShowerRemovesThePartFile) {
  gantry::testing::TempDir dir;
  const std::string path = dir.File("none.h5");
  {
    auto output = ShowerOutput::Create(path, "Ele", 4);
    ASSERT_TRUE(output.ok());
    EXPECT_TRUE(Exists(path + ".part"));
  }
  EXPECT_FALSE(Exists(path + ".part"));
  EXPECT_FALSE(Exists(path));
}

TEST(ShowerOutputTest, RefusesMalformedChunks) {
  gantry::testing::TempDir dir;
  auto output = ShowerOutput::Create(dir.File("bad.h5"), "Ele", 4);
  ASSERT_TRUE(output.ok());
  v1::GenerateChunk short_bytes = Chunk(0, 1, 25, 25, 25);
  short_bytes.mutable_showers()->resize(100);
  EXPECT_THAT((*output)->Append(short_bytes).message(), HasSubstr("100 bytes"));
  v1::GenerateChunk no_conditions = Chunk(0, 1, 25, 25, 25);
  no_conditions.clear_conditions();
  EXPECT_THAT((*output)->Append(no_conditions).message(), HasSubstr("0 conditions"));
  EXPECT_THAT((*output)->Append(Chunk(1, 1, 25, 25, 25)).message(), HasSubstr("arrived after 0"));
  v1::GenerateChunk flat = Chunk(0, 1, 25, 25, 25);
  flat.mutable_shape()->RemoveLast();
  EXPECT_EQ((*output)->Append(flat).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT((*output)->Append(Chunk(0, 5, 25, 25, 25)).message(), HasSubstr("more showers"));
  ASSERT_TRUE((*output)->Append(Chunk(0, 1, 25, 25, 25)).ok());
  EXPECT_THAT((*output)->Append(Chunk(1, 1, 51, 51, 25)).message(), HasSubstr("unlike"));
  EXPECT_EQ((*output)->showers(), 1);

  auto calo = ShowerOutput::Create(dir.File("calo.h5"), "Ele", 1);
  ASSERT_TRUE(calo.ok());
  EXPECT_THAT((*calo)->Append(Chunk(0, 1, 45, 16, 9)).message(), HasSubstr("no 3DGAN layout"));
}

TEST(ShowerOutputTest, UnwritableDirectoryFailsAtCreate) {
  absl::StatusOr<std::unique_ptr<ShowerOutput>> output =
      ShowerOutput::Create("/nonexistent-dir/gen.h5", "Ele", 1);
  ASSERT_FALSE(output.ok());
  EXPECT_THAT(output.status().message(), HasSubstr("/nonexistent-dir/gen.h5.part"));
  EXPECT_EQ(ShowerOutput::Create("x.h5", "Ele", 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gantry::cli
