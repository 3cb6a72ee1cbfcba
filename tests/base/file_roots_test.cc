// FileRoots: the allowlist of file:// dataset directories, lexically (the server) and resolved on
// a real file system with symbolic links (a worker).
#include "base/file_roots.h"

#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "gtest/gtest.h"

namespace gantry {
namespace {

namespace fs = std::filesystem;

TEST(NormalizePathLexically, RemovesDotsAndSlashes) {
  EXPECT_EQ(NormalizePathLexically("/a/./b//c/../d/"), "/a/b/d");
  EXPECT_EQ(NormalizePathLexically("/../../etc/passwd"), "/etc/passwd");
  EXPECT_EQ(NormalizePathLexically("a/../../b"), "../b");
  EXPECT_EQ(NormalizePathLexically("/"), "/");
}

TEST(PathIsUnder, ComparesWholeComponents) {
  EXPECT_TRUE(PathIsUnder("/data/calo/x.h5", "/data/calo"));
  EXPECT_TRUE(PathIsUnder("/data/calo", "/data/calo"));
  EXPECT_FALSE(PathIsUnder("/data/calorimeter/x.h5", "/data/calo"));
  EXPECT_FALSE(PathIsUnder("/data", "/data/calo"));
}

TEST(FileRoots, ParseRefusesRelativeAndRootDirectories) {
  EXPECT_EQ(FileRoots::Parse("data/calo", "file-roots").status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status root = FileRoots::Parse("/data,/", "file-roots").status();
  EXPECT_EQ(root.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(root.message().find("--file-roots"), std::string::npos) << root;
  EXPECT_EQ(FileRoots::Parse("/x/..", "file-roots").status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<FileRoots> roots = FileRoots::Parse(" /data/calo/ , /eos//shared ", "f");
  ASSERT_TRUE(roots.ok()) << roots.status();
  EXPECT_EQ(roots->roots(), (std::vector<std::string>{"/data/calo", "/eos/shared"}));
  EXPECT_TRUE(FileRoots::Parse("", "f")->empty());
}

TEST(FileRoots, TenantRootsParseAndMerge) {
  absl::StatusOr<std::map<std::string, FileRoots>> roots =
      ParseTenantFileRoots(" alice=/data/alice,/data/shared ; bob=/data/bob ", "tenant-roots");
  ASSERT_TRUE(roots.ok()) << roots.status();
  ASSERT_EQ(roots->size(), 2u);
  EXPECT_EQ(roots->at("alice").roots(), (std::vector<std::string>{"/data/alice", "/data/shared"}));
  EXPECT_EQ(roots->at("bob").roots(), (std::vector<std::string>{"/data/bob"}));
  EXPECT_TRUE(ParseTenantFileRoots("", "tenant-roots")->empty());
  for (const char* bad :
       {"/data/alice", "=/data", "alice=", "alice=relative", "alice=/", "alice=/a;alice=/b"}) {
    absl::Status s = ParseTenantFileRoots(bad, "tenant-roots").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("--tenant-roots"), std::string::npos) << s;
  }
  const FileRoots shared = *FileRoots::Parse("/data/shared,/eos", "f");
  EXPECT_EQ(shared.Merged(roots->at("alice")).roots(),
            (std::vector<std::string>{"/data/shared", "/eos", "/data/alice"}));
  EXPECT_EQ(FileRoots().Merged(roots->at("bob")).roots(), roots->at("bob").roots());
}

TEST(FileRoots, LexicalCheckKeepsPathsUnderARoot) {
  absl::StatusOr<FileRoots> roots = FileRoots::Parse("/data/calo", "f");
  ASSERT_TRUE(roots.ok());
  EXPECT_EQ(*roots->CheckLexical("/data/calo/run1/Ele.h5"), "/data/calo/run1/Ele.h5");
  EXPECT_EQ(*roots->CheckLexical("/data/calo/./a//b.h5"), "/data/calo/a/b.h5");
  for (const char* bad : {"/etc/shadow", "/data/calo/../../etc/shadow", "/data/calo",
                          "/data/calorimeter/x.h5", "relative.h5", ""}) {
    absl::StatusOr<std::string> got = roots->CheckLexical(bad);
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  absl::Status none = FileRoots().CheckLexical("/data/calo/x.h5").status();
  EXPECT_EQ(none.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(none.message().find("not enabled"), std::string::npos) << none;
}

class FileRootsOnDisk : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/gantry-file-roots-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    base_ = tmpl;
    fs::create_directories(base_ + "/data/run1");
    fs::create_directories(base_ + "/cache/datasets");
    fs::create_directories(base_ + "/other");
    std::ofstream(base_ + "/data/run1/Ele.h5") << "showers";
    std::ofstream(base_ + "/cache/datasets/abc.h5") << "another tenant's";
    std::ofstream(base_ + "/other/secret") << "secret";
    roots_ = *FileRoots::Parse(base_ + "/data", "f");
  }
  void TearDown() override { fs::remove_all(base_); }

  std::string base_;
  FileRoots roots_;
};

TEST_F(FileRootsOnDisk, ResolvesFilesUnderTheRoot) {
  absl::StatusOr<std::string> got = roots_.Resolve(base_ + "/data/run1/Ele.h5", {});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, fs::canonical(base_ + "/data/run1/Ele.h5").string());
  // A symbolic link inside the root to a file inside the root is fine.
  fs::create_symlink(base_ + "/data/run1/Ele.h5", base_ + "/data/latest.h5");
  EXPECT_TRUE(roots_.Resolve(base_ + "/data/latest.h5", {}).ok());
}

TEST_F(FileRootsOnDisk, RefusesSymlinksLeadingOut) {
  fs::create_symlink(base_ + "/other/secret", base_ + "/data/escape.h5");
  fs::create_symlink(base_ + "/other", base_ + "/data/dir-escape");
  fs::create_symlink("/etc/passwd", base_ + "/data/passwd.h5");
  for (const std::string& path :
       {base_ + "/data/escape.h5", base_ + "/data/dir-escape/secret", base_ + "/data/passwd.h5"}) {
    absl::StatusOr<std::string> got = roots_.Resolve(path, {});
    EXPECT_EQ(got.status().code(), absl::StatusCode::kPermissionDenied) << path;
  }
}

TEST_F(FileRootsOnDisk, RefusesTheDeniedCacheEvenThroughALink) {
  // An operator who put the cache under the data root: the cache stays out of reach.
  FileRoots wide = *FileRoots::Parse(base_, "f");
  absl::StatusOr<std::string> direct =
      wide.Resolve(base_ + "/cache/datasets/abc.h5", {base_ + "/cache"});
  EXPECT_EQ(direct.status().code(), absl::StatusCode::kPermissionDenied);
  fs::create_symlink(base_ + "/cache/datasets/abc.h5", base_ + "/data/cached.h5");
  absl::StatusOr<std::string> linked = wide.Resolve(base_ + "/data/cached.h5", {base_ + "/cache"});
  EXPECT_EQ(linked.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(linked.status().message().find(base_ + "/cache"), std::string::npos)
      << "the message must not name the worker's cache: " << linked.status();
}

TEST_F(FileRootsOnDisk, OutsideTheRootIsRefusedWithoutLookingAtTheFile) {
  // Same answer whether the file exists or not: no oracle for files outside the roots.
  EXPECT_EQ(roots_.Resolve(base_ + "/other/secret", {}).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(roots_.Resolve(base_ + "/other/missing", {}).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(roots_.Resolve(base_ + "/data/run1/missing.h5", {}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(FileRootsOnDisk, ARootThatIsASymlinkIsResolvedToo) {
  fs::create_symlink(base_ + "/data", base_ + "/data-link");
  FileRoots linked = *FileRoots::Parse(base_ + "/data-link", "f");
  EXPECT_TRUE(linked.Resolve(base_ + "/data-link/run1/Ele.h5", {}).ok());
}

}  // namespace
}  // namespace gantry
