// LoadOrCreateKeyFile: a private key file made once and read after, refused when shared or
// malformed.
#include "server/platform/secret_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/support/temp_dir.h"

namespace gantry::server {
namespace {

using ::gantry::testing::TempDir;

std::string Write(const TempDir& dir, const std::string& name, const std::string& content) {
  const std::string path = dir.File(name);
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

TEST(KeyFileTest, IsMadePrivateOnceAndReadAfter) {
  TempDir dir;
  const std::string path = dir.File("keys/rank-credentials.key");  // its folder is made too
  absl::StatusOr<std::string> made = LoadOrCreateKeyFile(path, "--rank-key-file");
  ASSERT_TRUE(made.ok()) << made.status();
  EXPECT_EQ(made->size(), 64u);
  EXPECT_EQ(made->find_first_not_of("0123456789abcdef"), std::string::npos) << *made;
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(stat(dir.File("keys").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0077, 0u) << "the folder it made is private";
  absl::StatusOr<std::string> again = LoadOrCreateKeyFile(path, "--rank-key-file");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, *made);
  // Nothing else is left beside it (the temporary file is gone).
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir.File("keys")),
                          std::filesystem::directory_iterator()),
            1);
  // An operator's key (openssl rand -hex 32) is taken as it is.
  const std::string mine =
      Write(dir, "mine.key", std::string(32, 'A') + std::string(32, '0') + "\n");
  chmod(mine.c_str(), 0400);
  EXPECT_EQ(*LoadOrCreateKeyFile(mine, "--rank-key-file"),
            std::string(32, 'A') + std::string(32, '0'));
}

TEST(KeyFileTest, RefusesAKeyOthersCanReadOrWriteAndAFileWithoutAKey) {
  TempDir dir;
  const std::string key(64, 'b');
  for (mode_t mode : {0644, 0640, 0604, 0620, 0602}) {
    const std::string path = Write(dir, "shared.key", key);
    chmod(path.c_str(), mode);
    absl::StatusOr<std::string> loaded = LoadOrCreateKeyFile(path, "--rank-key-file");
    ASSERT_EQ(loaded.status().code(), absl::StatusCode::kFailedPrecondition) << mode;
    EXPECT_NE(loaded.status().message().find("--rank-key-file " + path), std::string::npos)
        << loaded.status();
    EXPECT_NE(loaded.status().message().find("chmod 600"), std::string::npos) << loaded.status();
  }
  for (const std::string& content : {std::string("short"), std::string(63, 'a'),
                                     std::string(65, 'a'), std::string(62, 'a') + "zz"}) {
    const std::string path = Write(dir, "bad.key", content);
    chmod(path.c_str(), 0600);
    absl::StatusOr<std::string> loaded = LoadOrCreateKeyFile(path, "--rank-key-file");
    ASSERT_EQ(loaded.status().code(), absl::StatusCode::kFailedPrecondition) << content;
    EXPECT_NE(loaded.status().message().find("exactly 64 hex characters"), std::string::npos)
        << loaded.status();
  }
  const std::string empty = Write(dir, "empty.key", "");
  chmod(empty.c_str(), 0600);
  EXPECT_FALSE(LoadOrCreateKeyFile(empty, "--rank-key-file").ok());
  std::filesystem::create_directory(dir.File("a-folder.key"));
  chmod(dir.File("a-folder.key").c_str(), 0700);
  absl::StatusOr<std::string> folder =
      LoadOrCreateKeyFile(dir.File("a-folder.key"), "--rank-key-file");
  EXPECT_EQ(folder.status().code(), absl::StatusCode::kFailedPrecondition) << folder.status();
}

}  // namespace
}  // namespace gantry::server
