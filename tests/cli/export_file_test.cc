#include "clients/cli/export_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "base/sha256.h"
#include "tests/support/temp_dir.h"

namespace gantry::cli {
namespace {

bool Exists(const std::string& path) { return std::filesystem::exists(path); }

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

gantry::v1::ExportMetadata Metadata(const std::string& bytes) {
  gantry::v1::ExportMetadata m;
  m.set_size_bytes(static_cast<int64_t>(bytes.size()));
  m.set_sha256(Sha256Hex(bytes));
  return m;
}

TEST(ExportFileTest, WritesTheTmpFileThenRenamesItWhenSizeAndSha256Match) {
  gantry::testing::TempDir dir;
  const std::string path = dir.File("ele.onnx");
  auto file = ExportFile::Create(path, /*force=*/false);
  ASSERT_TRUE(file.ok()) << file.status();
  const std::string bytes = "0123456789abcdef";
  ASSERT_TRUE((*file)->Begin(Metadata(bytes)).ok());
  EXPECT_TRUE(Exists(path + ".tmp"));
  EXPECT_FALSE(Exists(path));
  ASSERT_TRUE((*file)->Append(0, bytes.substr(0, 10)).ok());
  ASSERT_TRUE((*file)->Append(10, bytes.substr(10)).ok());
  ASSERT_TRUE((*file)->Finish().ok());
  EXPECT_EQ(Read(path), bytes);
  EXPECT_FALSE(Exists(path + ".tmp"));
  EXPECT_EQ((*file)->sha256(), Sha256Hex(bytes));
  EXPECT_EQ((*file)->bytes(), 16);
}

TEST(ExportFileTest, AnExistingFileIsRefusedWithoutForceAndKeptUntilTheNewOneIsVerified) {
  gantry::testing::TempDir dir;
  const std::string path = dir.File("ele.pt");
  std::ofstream(path) << "old";
  auto refused = ExportFile::Create(path, /*force=*/false);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(refused.status().message().find("exists; give another --out or --force"),
            std::string::npos);
  {
    auto file = ExportFile::Create(path, /*force=*/true);
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE((*file)->Begin(Metadata("new bytes")).ok());
    ASSERT_TRUE((*file)->Append(0, "new").ok());
    // Destroyed unfinished (the stream broke): FILE.tmp goes, FILE stays as it was.
  }
  EXPECT_EQ(Read(path), "old");
  EXPECT_FALSE(Exists(path + ".tmp"));
  auto file = ExportFile::Create(path, /*force=*/true);
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->Begin(Metadata("new bytes")).ok());
  ASSERT_TRUE((*file)->Append(0, "new bytes").ok());
  ASSERT_TRUE((*file)->Finish().ok());
  EXPECT_EQ(Read(path), "new bytes");
}

TEST(ExportFileTest, BytesThatDoNotMatchTheMetadataAreDataLossAndLeaveNothing) {
  gantry::testing::TempDir dir;
  const std::string path = dir.File("x.onnx");
  {
    auto file = ExportFile::Create(path, false);
    ASSERT_TRUE((*file)->Begin(Metadata("expected")).ok());
    ASSERT_TRUE((*file)->Append(0, "EXPECTED").ok());  // same size, other sha256
    absl::Status s = (*file)->Finish();
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  }
  {
    auto file = ExportFile::Create(path, false);
    ASSERT_TRUE((*file)->Begin(Metadata("expected")).ok());
    EXPECT_EQ((*file)->Append(1, "x").code(), absl::StatusCode::kDataLoss);          // a gap
    EXPECT_EQ((*file)->Append(0, "expected!").code(), absl::StatusCode::kDataLoss);  // too long
    EXPECT_EQ((*file)->Finish().code(), absl::StatusCode::kDataLoss);                // short
  }
  {
    auto file = ExportFile::Create(path, false);
    EXPECT_FALSE((*file)->Append(0, "data first").ok());
    gantry::v1::ExportMetadata huge = Metadata("x");
    huge.set_size_bytes(ExportFile::kMaxBytes + 1);
    EXPECT_FALSE((*file)->Begin(huge).ok());
    gantry::v1::ExportMetadata no_sha = Metadata("x");
    no_sha.set_sha256("abc");
    EXPECT_FALSE((*file)->Begin(no_sha).ok());
  }
  EXPECT_FALSE(Exists(path));
  EXPECT_FALSE(Exists(path + ".tmp"));
}

}  // namespace
}  // namespace gantry::cli
