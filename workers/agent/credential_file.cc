#include "workers/agent/credential_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace gantry::agent {
namespace {

constexpr size_t kMaxCredentialChars = 512;

}  // namespace

absl::StatusOr<std::string> ReadCredentialFile(const std::string& path) {
  if (access(path.c_str(), F_OK) != 0 && errno == ENOENT) return std::string();
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--credential-file: cannot read ", path, " (", std::strerror(errno), ")"));
  }
  std::string content(kMaxCredentialChars + 2, '\0');
  in.read(content.data(), static_cast<std::streamsize>(content.size()));
  content.resize(static_cast<size_t>(in.gcount()));
  const std::string secret(absl::StripAsciiWhitespace(content));
  if (!absl::StartsWith(secret, "gwc_") || secret.size() > kMaxCredentialChars) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--credential-file: ", path,
        " does not hold a worker credential (\"gwc_...\"); remove it to register afresh, which "
        "needs the name to be free"));
  }
  return secret;
}

absl::Status WriteCredentialFile(const std::string& path, const std::string& secret) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  const auto failed = [&](absl::string_view what) {
    return absl::UnavailableError(
        absl::StrCat("cannot ", what, " ", tmp, " for --credential-file: ", std::strerror(errno)));
  };
  const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return failed("create");
  const std::string content = secret + "\n";
  const bool written =
      fchmod(fd, 0600) == 0 &&
      write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()) &&
      fsync(fd) == 0;
  const int saved = errno;
  close(fd);
  if (!written) {
    unlink(tmp.c_str());
    errno = saved;
    return failed("write");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int rename_errno = errno;
    unlink(tmp.c_str());
    errno = rename_errno;
    return failed("rename");
  }
  return absl::OkStatus();
}

}  // namespace gantry::agent
