#include "server/platform/secret_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/secret_file.h"
#include "base/sha256.h"
#include "base/status_macros.h"

namespace gantry::server {

namespace {

constexpr size_t kKeyHexChars = 64;

bool IsKeyHex(absl::string_view key) {
  if (key.size() != kKeyHexChars) return false;
  for (char c : key) {
    if (!absl::ascii_isxdigit(c)) return false;
  }
  return true;
}

// Writes a fresh key to a private temporary file beside `path` and links it there; EEXIST when
// another process (or an earlier start) was first, which the caller resolves by reading.
absl::Status CreateKeyFile(const std::string& path, absl::string_view flag) {
  const auto failed = [&](absl::string_view what) {
    return absl::FailedPreconditionError(absl::StrCat("cannot create ", flag, " ", path, " (", what,
                                                      ": ", std::strerror(errno),
                                                      "): the server must be able to write it"));
  };
  std::error_code error;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty() && !std::filesystem::exists(parent, error)) {
    std::filesystem::create_directories(parent, error);
    if (error) {
      errno = error.value();
      return failed("its directory");
    }
    std::filesystem::permissions(parent, std::filesystem::perms::owner_all, error);
  }
  const std::string tmp = absl::StrCat(path, ".", RandomSecretHex(8), ".tmp");
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return failed("a temporary file");
  const std::string content = RandomSecretHex(kKeyHexChars / 2) + "\n";
  const bool written =
      write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()) &&
      fsync(fd) == 0;
  const int write_errno = errno;
  close(fd);
  if (!written) {
    unlink(tmp.c_str());
    errno = write_errno;
    return failed("writing");
  }
  const int linked = link(tmp.c_str(), path.c_str());
  const int link_errno = errno;
  unlink(tmp.c_str());
  if (linked != 0 && link_errno == EEXIST) return absl::AlreadyExistsError("raced");
  if (linked != 0) {
    errno = link_errno;
    return failed("link");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> LoadOrCreateKeyFile(const std::string& path, absl::string_view flag) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot read ", flag, " ", path, " (", std::strerror(errno), ")"));
    }
    if (absl::Status created = CreateKeyFile(path, flag);
        !created.ok() && !absl::IsAlreadyExists(created)) {
      return created;
    }
    if (stat(path.c_str(), &st) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot read ", flag, " ", path, " (", std::strerror(errno), ")"));
    }
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(flag, " ", path,
                     " is not a regular file: it must hold the key (64 hex "
                     "characters; remove it and the server makes one)"));
  }
  // ReadSecretFile refuses a key others may read (CheckSecretFileMode).
  ASSIGN_OR_RETURN(std::string key, ReadSecretFile(path, flag, "the key (64 hex characters)"));
  if (!IsKeyHex(key)) {
    return absl::FailedPreconditionError(
        absl::StrCat(flag, " ", path,
                     " does not hold a key: it must hold exactly 64 hex characters (32 "
                     "bytes, e.g. `openssl rand -hex 32`); or remove it and the server makes one"));
  }
  return key;
}

}  // namespace gantry::server
