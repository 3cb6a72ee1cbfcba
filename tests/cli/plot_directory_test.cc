#include "clients/cli/plot_directory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/support/temp_dir.h"

namespace gantry::cli {
namespace {

using ::testing::HasSubstr;

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(PlotDirectoryTest, CreatesMissingFoldersAndWritesPlainNames) {
  gantry::testing::TempDir dir;
  auto out = PlotDirectory::Open(dir.File("a/b"), false);
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_TRUE((*out)->Write("index.md", "hello").ok());
  EXPECT_EQ(Read(dir.File("a/b/index.md")), "hello");
  ASSERT_TRUE((*out)->Write("index.md", "again").ok());
  EXPECT_EQ(Read(dir.File("a/b/index.md")), "again");
  for (const char* bad : {"../x.png", "a/b.png", ".hidden", "", "X.png", "x\n.png"}) {
    EXPECT_EQ((*out)->Write(bad, "x").code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.File("a/x.png")));
}

TEST(PlotDirectoryTest, RefusesNonEmptyFoldersAndFilesUnlessForced) {
  gantry::testing::TempDir dir;
  std::ofstream(dir.File("file")) << "x";
  const absl::Status not_folder = PlotDirectory::Check(dir.File("file"), true);
  EXPECT_EQ(not_folder.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(not_folder.message(), HasSubstr("is not a folder"));
  const absl::Status busy = PlotDirectory::Check(dir.path(), false);
  EXPECT_EQ(busy.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(busy.message(), HasSubstr("give --force"));
  EXPECT_TRUE(PlotDirectory::Check(dir.path(), true).ok());
  EXPECT_TRUE(PlotDirectory::Check(dir.File("new"), false).ok());
  EXPECT_FALSE(std::filesystem::exists(dir.File("new")));  // Check creates nothing
}

TEST(PlotDirectoryTest, NeverWritesThroughASymbolicLink) {
  gantry::testing::TempDir dir;
  std::filesystem::create_directories(dir.File("out"));
  std::ofstream(dir.File("victim")) << "keep";
  ASSERT_EQ(::symlink(dir.File("victim").c_str(), dir.File("out/index.md").c_str()), 0);
  auto out = PlotDirectory::Open(dir.File("out"), true);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_FALSE((*out)->Write("index.md", "overwritten").ok());
  EXPECT_EQ(Read(dir.File("victim")), "keep");
}

}  // namespace
}  // namespace gantry::cli
