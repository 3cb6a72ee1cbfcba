#include "workers/agent/credential_file.h"

#include <unistd.h>

#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/atomic_file.h"
#include "base/secret_file.h"

namespace gantry::agent {
namespace {

constexpr size_t kMaxCredentialChars = 512;

}  // namespace

absl::StatusOr<std::string> ReadCredentialFile(const std::string& path) {
  if (access(path.c_str(), F_OK) != 0 && errno == ENOENT) return std::string();
  absl::StatusOr<std::string> secret = ReadSecretFile(path, "--credential-file",
                                                      "a worker credential", 1, kMaxCredentialChars);
  // Unreadable or not private: as ReadSecretFile says.
  if (!secret.ok() && !absl::IsInvalidArgument(secret.status())) return secret.status();
  if (!secret.ok() || !absl::StartsWith(*secret, "gwc_")) {
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
