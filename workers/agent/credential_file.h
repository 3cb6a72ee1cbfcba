// CredentialFile: where the daemon keeps its worker credential between runs (--credential-file),
// so a restarted daemon proves it is the worker of its name and keeps its id; without it the
// server refuses the name while the old credential is valid.
#ifndef GANTRY_WORKERS_AGENT_CREDENTIAL_FILE_H_
#define GANTRY_WORKERS_AGENT_CREDENTIAL_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gantry::agent {

// The worker credential stored at `path`; "" when there is no such file (a first start).
// Errors name --credential-file: NOT_FOUND when it cannot be read, FAILED_PRECONDITION when group or
// others may read it (base/secret_file.h), INVALID_ARGUMENT when it holds no worker credential
// ("gwc_...", at most 512 characters).
absl::StatusOr<std::string> ReadCredentialFile(const std::string& path);

// Replaces the file at `path` with `secret` atomically (a mode 0600 temporary file beside it,
// synced, then renamed over it), so a crash leaves the old credential or the new one.
absl::Status WriteCredentialFile(const std::string& path, const std::string& secret);

}  // namespace gantry::agent

#endif  // GANTRY_WORKERS_AGENT_CREDENTIAL_FILE_H_
