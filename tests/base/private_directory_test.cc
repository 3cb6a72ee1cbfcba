// Tests of MakePrivateDirectory (base/private_directory.h) on real directories.
#include "base/private_directory.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <string>

#include "tests/support/temp_dir.h"

namespace gantry {
namespace {

mode_t ModeOf(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

TEST(PrivateDirectoryTest, CreatesTheDirectoryAndItsParents0700) {
  testing::TempDir dir;
  const std::string path = dir.File("a/b/cache");
  absl::StatusOr<std::string> note = MakePrivateDirectory(path);
  ASSERT_TRUE(note.ok()) << note.status();
  EXPECT_EQ(*note, "");
  EXPECT_EQ(ModeOf(dir.File("a")), 0700u);
  EXPECT_EQ(ModeOf(dir.File("a/b")), 0700u);
  EXPECT_EQ(ModeOf(path), 0700u);
}

TEST(PrivateDirectoryTest, TightensAnOpenDirectoryOfOursAndSaysSo) {
  testing::TempDir dir;
  for (const mode_t open : {0755, 0750, 0777, 02775, 0701}) {
    const std::string path = dir.File("open");
    ASSERT_EQ(::mkdir(path.c_str(), 0700), 0);
    ASSERT_EQ(::chmod(path.c_str(), open), 0);
    std::ofstream(path + "/kept") << "data";
    absl::StatusOr<std::string> note = MakePrivateDirectory(path);
    ASSERT_TRUE(note.ok()) << note.status();
    char expected[80];
    std::snprintf(expected, sizeof expected, " from %04o to 0700", open);
    EXPECT_EQ(*note, "tightened " + path + expected);
    EXPECT_EQ(ModeOf(path), 0700u);
    EXPECT_TRUE(std::ifstream(path + "/kept").good()) << "the content stays";
    ASSERT_EQ(std::remove((path + "/kept").c_str()), 0);
    ASSERT_EQ(::rmdir(path.c_str()), 0);
  }
}

TEST(PrivateDirectoryTest, APrivateDirectoryIsLeftAlone) {
  testing::TempDir dir;
  const std::string path = dir.File("private");
  ASSERT_EQ(::mkdir(path.c_str(), 0700), 0);
  absl::StatusOr<std::string> note = MakePrivateDirectory(path);
  ASSERT_TRUE(note.ok()) << note.status();
  EXPECT_EQ(*note, "");
  EXPECT_EQ(ModeOf(path), 0700u);
}

TEST(PrivateDirectoryTest, AFileOrAnUncreatablePathIsRefusedNamingIt) {
  testing::TempDir dir;
  std::ofstream(dir.File("file")) << "x";
  absl::StatusOr<std::string> file = MakePrivateDirectory(dir.File("file"));
  EXPECT_EQ(file.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(file.status().message(), dir.File("file") + " exists and is not a directory");
  absl::StatusOr<std::string> below = MakePrivateDirectory(dir.File("file/sub"));
  EXPECT_EQ(below.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(below.status().message().find(dir.File("file")), std::string::npos) << below.status();
}

TEST(PrivateDirectoryTest, PrivateUmaskMakesNewFilesAndDirectoriesPrivate) {
  testing::TempDir dir;
  const mode_t before = ::umask(022);
  UsePrivateUmask();
  std::ofstream(dir.File("file")) << "x";
  ASSERT_EQ(::mkdir(dir.File("sub").c_str(), 0777), 0);
  ::umask(before);
  EXPECT_EQ(ModeOf(dir.File("file")), 0600u);
  EXPECT_EQ(ModeOf(dir.File("sub")), 0700u);
}

}  // namespace
}  // namespace gantry
