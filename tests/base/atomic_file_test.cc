// WriteFileAtomically: content, replace or keep, stale and hostile .tmp files, errors.
#include "base/atomic_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace gantry {
namespace {

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char templ[] = "/tmp/gantry-atomic-XXXXXX";
    ASSERT_NE(mkdtemp(templ), nullptr);
    dir_ = templ;
  }
  void TearDown() override { std::system(("rm -rf " + dir_).c_str()); }

  static std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  static bool Exists(const std::string& path) {
    struct stat st;
    return lstat(path.c_str(), &st) == 0;
  }

  std::string dir_;
};

TEST_F(AtomicFileTest, WritesThePiecesInOrderAndLeavesNoTmp) {
  const std::string path = dir_ + "/f";
  ASSERT_TRUE(WriteFileAtomically(path, {"head\n", "", std::string(100000, 'x')}).ok());
  EXPECT_EQ(Read(path), "head\n" + std::string(100000, 'x'));
  EXPECT_FALSE(Exists(path + ".tmp"));
}

TEST_F(AtomicFileTest, ReplaceOverwritesKeepRefusesWithAlreadyExists) {
  const std::string path = dir_ + "/f";
  ASSERT_TRUE(WriteFileAtomically(path, {"one"}).ok());
  ASSERT_TRUE(WriteFileAtomically(path, {"two"}, ExistingFile::kReplace).ok());
  EXPECT_EQ(Read(path), "two");
  const absl::Status kept = WriteFileAtomically(path, {"three"}, ExistingFile::kKeep);
  EXPECT_TRUE(absl::IsAlreadyExists(kept)) << kept;
  EXPECT_EQ(Read(path), "two");
  EXPECT_FALSE(Exists(path + ".tmp"));
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/new", {"four"}, ExistingFile::kKeep).ok());
  EXPECT_EQ(Read(dir_ + "/new"), "four");
}

TEST_F(AtomicFileTest, AStaleTmpIsReplacedAndASymlinkThereIsNotFollowed) {
  const std::string path = dir_ + "/f";
  const std::string victim = dir_ + "/victim";
  { std::ofstream(victim) << "precious"; }
  ASSERT_EQ(symlink(victim.c_str(), (path + ".tmp").c_str()), 0);
  ASSERT_TRUE(WriteFileAtomically(path, {"new"}).ok());
  EXPECT_EQ(Read(path), "new");
  EXPECT_EQ(Read(victim), "precious");
  EXPECT_FALSE(Exists(path + ".tmp"));
}

TEST_F(AtomicFileTest, AMissingDirectoryIsUnavailable) {
  const absl::Status status = WriteFileAtomically(dir_ + "/no/such/f", {"x"});
  EXPECT_TRUE(absl::IsUnavailable(status)) << status;
}

}  // namespace
}  // namespace gantry
