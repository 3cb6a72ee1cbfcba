// Secret files: a token, a DSN, a credential or a private key that a flag names by file, as mounted
// container and Kubernetes secrets provide them, keeping it out of the process list. Read only when
// private: a secret that group or others may read is refused, as PostgreSQL and OpenSSH refuse
// theirs.
#ifndef GANTRY_BASE_SECRET_FILE_H_
#define GANTRY_BASE_SECRET_FILE_H_

#include <sys/stat.h>

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry {

// The largest secret file read by default (a DSN or a token is far smaller; anything bigger is a
// wrong path).
inline constexpr size_t kMaxSecretFileBytes = 64 * 1024;

// Whether a file with status `st` is private enough to hold a secret (PostgreSQL's rule for its
// key file): owned by this process's user with no access for group or others (0600 or tighter),
// or, for a process not running as root, owned by root with at most read access for its group
// (0640 or tighter: Kubernetes mounts a Secret as root:fsGroup with its defaultMode, e.g. 0440).
// FAILED_PRECONDITION otherwise, naming `flag`, the path, its mode and owner, and what to change.
absl::Status CheckSecretFileMode(const struct stat& st, absl::string_view flag,
                                 absl::string_view path);
// The same for a process whose effective user is `me`.
absl::Status CheckSecretFileModeFor(uid_t me, const struct stat& st, absl::string_view flag,
                                    absl::string_view path);

// A regular file read through one descriptor: opened with O_NONBLOCK (a FIFO named by mistake does
// not hang the open), its status taken from that descriptor (so a check of the mode applies to the
// bytes read), and at most max_bytes + 1 bytes read (more than max_bytes: the file is too large).
struct RegularFileRead {
  struct stat st;
  std::string bytes;
};
// NOT_FOUND when nothing is at `path`; FAILED_PRECONDITION when it cannot be opened or read, is a
// directory or is not a regular file. The message is the reason alone ("a directory", the errno
// text), for the caller to name the file as its flag calls it.
absl::StatusOr<RegularFileRead> ReadRegularFile(const std::string& path, size_t max_bytes);

// The content of the file at `path` without surrounding whitespace (a trailing newline is usual).
// Errors name `flag` and say what the file must hold (`what`, e.g. "the libpq DSN"):
// NOT_FOUND "cannot read FLAG PATH (...): ..." for a missing or unreadable path, a directory or
// anything but a regular file; FAILED_PRECONDITION when group or others may read it
// (CheckSecretFileMode); INVALID_ARGUMENT when it is larger than `max_bytes`, empty, or shorter
// than `min_chars` characters.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path, absl::string_view flag,
                                           absl::string_view what, size_t min_chars = 1,
                                           size_t max_bytes = kMaxSecretFileBytes);

}  // namespace gantry

#endif  // GANTRY_BASE_SECRET_FILE_H_
