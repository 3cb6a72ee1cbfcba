#include "workers/agent/credential_file.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"

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
  // 0600 from creation; a symlink at the temporary name is not followed.
  return WriteFileAtomically(path, {secret, "\n"}, ExistingFile::kReplace, 0600);
}

}  // namespace gantry::agent
