// ReadSecretFile: trimmed secrets, and a clear error naming the flag for every bad file.
#include "server/secret_file.h"

#include <gtest/gtest.h>

#include <fstream>
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

}  // namespace
}  // namespace gantry::server
