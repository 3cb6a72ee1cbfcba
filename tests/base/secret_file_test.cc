// ReadSecretFile: trimmed secrets, and a clear error naming the flag for every bad file; a secret
// that group or others may read is refused (CheckSecretFileMode, PostgreSQL's rule).
#include "base/secret_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/temp_dir.h"

namespace gantry {
namespace {

using ::gantry::testing::TempDir;

// A private file (0600) holding `content`.
std::string Write(const TempDir& dir, const std::string& name, const std::string& content) {
  const std::string path = dir.File(name);
  std::ofstream(path, std::ios::binary) << content;
  chmod(path.c_str(), 0600);
  return path;
}

TEST(SecretFileTest, ReturnsTheContentWithoutSurroundingWhitespace) {
  TempDir dir;
  const std::string path = Write(dir, "dsn", "  host=/run/pg dbname=gantry password=x y\n\n");
  absl::StatusOr<std::string> secret = ReadSecretFile(path, "--db-file", "the libpq DSN");
  ASSERT_TRUE(secret.ok()) << secret.status();
  EXPECT_EQ(*secret, "host=/run/pg dbname=gantry password=x y");
}

TEST(SecretFileTest, MissingFileAndDirectorySayCannotReadWithFlagAndPath) {
  TempDir dir;
  for (const std::string& path : {dir.File("none"), dir.path()}) {
    absl::StatusOr<std::string> secret = ReadSecretFile(path, "--db-file", "the libpq DSN");
    ASSERT_EQ(secret.status().code(), absl::StatusCode::kNotFound) << path;
    EXPECT_EQ(secret.status().message().rfind("cannot read --db-file " + path + " (", 0), 0u)
        << secret.status();
    EXPECT_NE(secret.status().message().find("holding the libpq DSN"), std::string::npos)
        << secret.status();
  }
}

TEST(SecretFileTest, EmptyShortAndOversizedFilesAreInvalidWithWhatToWrite) {
  TempDir dir;
  const std::string blank = Write(dir, "blank", " \n\t\n");
  absl::StatusOr<std::string> secret = ReadSecretFile(blank, "--db-file", "the libpq DSN");
  ASSERT_EQ(secret.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(secret.status().message(),
            "--db-file " + blank + " is empty: write the libpq DSN into it");

  const std::string empty = Write(dir, "empty", "");
  EXPECT_EQ(ReadSecretFile(empty, "--db-file", "the libpq DSN").status().code(),
            absl::StatusCode::kInvalidArgument);

  const std::string shorter = Write(dir, "short", "fifteen-chars-x\n");
  secret = ReadSecretFile(shorter, "--join-token-file", "the worker join token", 16);
  ASSERT_EQ(secret.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(secret.status().message(), "--join-token-file " + shorter +
                                           ": the worker join token in it is shorter than 16 "
                                           "characters");
  EXPECT_TRUE(
      ReadSecretFile(Write(dir, "ok", "sixteen-chars-xx"), "--join-token-file", "a token", 16)
          .ok());

  const std::string huge = Write(dir, "huge", std::string(kMaxSecretFileBytes + 1, 'a'));
  secret = ReadSecretFile(huge, "--admin-token-file", "the admin tenant's token", 16);
  ASSERT_EQ(secret.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(secret.status().message().find("is larger than 64 KiB"), std::string::npos)
      << secret.status();
  EXPECT_TRUE(ReadSecretFile(Write(dir, "max", std::string(kMaxSecretFileBytes, 'a')),
                             "--admin-token-file", "a token", 16)
                  .ok());
}

TEST(SecretFileTest, AFileGroupOrOthersMayReadIsRefusedSayingWhatToChange) {
  TempDir dir;
  for (mode_t mode : {0644, 0640, 0604, 0620, 0660, 0602}) {
    const std::string path = Write(dir, "shared.token", "a-token-long-enough-to-pass\n");
    chmod(path.c_str(), mode);
    absl::StatusOr<std::string> secret = ReadSecretFile(path, "--join-token-file", "the token");
    ASSERT_EQ(secret.status().code(), absl::StatusCode::kFailedPrecondition) << mode;
    EXPECT_NE(secret.status().message().find("--join-token-file " + path + " has mode 0"),
              std::string::npos)
        << secret.status();
    EXPECT_NE(secret.status().message().find("chmod 600"), std::string::npos) << secret.status();
  }
  const std::string mine = Write(dir, "mine.token", "a-token-long-enough-to-pass\n");
  chmod(mine.c_str(), 0400);
  EXPECT_TRUE(ReadSecretFile(mine, "--join-token-file", "the token").ok());
  // A link to a private file (how Kubernetes mounts a Secret's keys) is read through.
  std::filesystem::create_symlink(mine, dir.File("link.token"));
  EXPECT_TRUE(ReadSecretFile(dir.File("link.token"), "--join-token-file", "the token").ok());
}

TEST(SecretFileTest, AFifoIsNotASecretFileAndDoesNotHang) {
  TempDir dir;
  ASSERT_EQ(mkfifo(dir.File("pipe").c_str(), 0600), 0);
  absl::StatusOr<std::string> secret = ReadSecretFile(dir.File("pipe"), "--db-file", "the DSN");
  EXPECT_EQ(secret.status().code(), absl::StatusCode::kNotFound) << secret.status();
  EXPECT_NE(secret.status().message().find("not a regular file"), std::string::npos)
      << secret.status();
}

struct stat StatOf(uid_t owner, mode_t mode) {
  struct stat st = {};
  st.st_uid = owner;
  st.st_mode = S_IFREG | mode;
  return st;
}

TEST(SecretFileModeTest, OwnersFilesArePrivateAndRootsMayBeGroupReadable) {
  constexpr uid_t kMe = 1000;
  // The process's own file: 0600 or tighter.
  for (mode_t mode : {0600, 0400, 0200}) {
    EXPECT_TRUE(CheckSecretFileModeFor(kMe, StatOf(kMe, mode), "--f", "p").ok()) << mode;
  }
  for (mode_t mode : {0640, 0604, 0610, 0601, 0620, 0700 | 0044}) {
    absl::Status s = CheckSecretFileModeFor(kMe, StatOf(kMe, mode), "--f", "p");
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << mode;
    EXPECT_NE(s.message().find("chmod 600"), std::string::npos) << s;
  }
  // Root's file, as a Kubernetes Secret volume mounts it (root:fsGroup, defaultMode 0440): at most
  // group read.
  for (mode_t mode : {0440, 0640, 0400, 0600}) {
    EXPECT_TRUE(CheckSecretFileModeFor(kMe, StatOf(0, mode), "--f", "p").ok()) << mode;
  }
  for (mode_t mode : {0644, 0660, 0604, 0650}) {
    absl::Status s = CheckSecretFileModeFor(kMe, StatOf(0, mode), "--f", "p");
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << mode;
    EXPECT_NE(s.message().find("owned by root"), std::string::npos) << s;
    EXPECT_NE(s.message().find("0640 or tighter"), std::string::npos) << s;
  }
  // Another user's file is refused whatever its mode.
  absl::Status other = CheckSecretFileModeFor(kMe, StatOf(2000, 0600), "--f", "p");
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(other.message().find("owned by uid 2000"), std::string::npos) << other;
  // A process running as root holds its own files to 0600.
  EXPECT_TRUE(CheckSecretFileModeFor(0, StatOf(0, 0600), "--f", "p").ok());
  EXPECT_EQ(CheckSecretFileModeFor(0, StatOf(0, 0640), "--f", "p").code(),
            absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace gantry
