#include "base/secret_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace gantry {
namespace {

std::string Octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// A file descriptor closed when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

absl::Status CheckSecretFileMode(const struct stat& st, absl::string_view flag,
                                 absl::string_view path) {
  return CheckSecretFileModeFor(geteuid(), st, flag, path);
}

absl::Status CheckSecretFileModeFor(uid_t me, const struct stat& st, absl::string_view flag,
                                    absl::string_view path) {
  const bool mine = st.st_uid == me;
  const bool roots = st.st_uid == 0 && me != 0;
  const mode_t shared = st.st_mode & (roots ? 037 : 077);
  if ((mine || roots) && shared == 0) return absl::OkStatus();
  if (!mine && !roots) {
    return absl::FailedPreconditionError(absl::StrCat(
        flag, " ", path, " is owned by uid ", st.st_uid, ", not by this process's user (uid ", me,
        ") or root: a secret file must be its user's own (chown it, chmod 600)"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      flag, " ", path, " has mode ", Octal(st.st_mode),
      roots ? " and is owned by root: others may read or write it, or its group write it; make it "
              "0640 or tighter (a Kubernetes Secret: defaultMode 0440)"
            : ": group or others may read or write it; make it private (chmod 600) and keep it "
              "out of backups that others can read"));
}

absl::StatusOr<RegularFileRead> ReadRegularFile(const std::string& path, size_t max_bytes) {
  const Fd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (fd.get() < 0) {
    return errno == ENOENT ? absl::NotFoundError(std::strerror(errno))
                           : absl::FailedPreconditionError(std::strerror(errno));
  }
  RegularFileRead file;
  if (fstat(fd.get(), &file.st) != 0) return absl::FailedPreconditionError(std::strerror(errno));
  if (S_ISDIR(file.st.st_mode)) return absl::FailedPreconditionError("a directory");
  if (!S_ISREG(file.st.st_mode)) return absl::FailedPreconditionError("not a regular file");
  file.bytes.assign(max_bytes + 1, '\0');
  size_t got = 0;
  while (got < file.bytes.size()) {
    const ssize_t n = read(fd.get(), file.bytes.data() + got, file.bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::FailedPreconditionError(std::strerror(errno));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  file.bytes.resize(got);
  return file;
}

absl::StatusOr<std::string> ReadSecretFile(const std::string& path, absl::string_view flag,
                                           absl::string_view what, size_t min_chars,
                                           size_t max_bytes) {
  const auto unreadable = [&](absl::string_view why) {
    return absl::NotFoundError(absl::StrCat("cannot read ", flag, " ", path, " (", why,
                                            "): it must be a readable file holding ", what));
  };
  absl::StatusOr<RegularFileRead> file = ReadRegularFile(path, max_bytes);
  if (!file.ok()) return unreadable(file.status().message());
  if (absl::Status mode = CheckSecretFileMode(file->st, flag, path); !mode.ok()) return mode;
  const std::string& content = file->bytes;
  if (content.size() > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(flag, " ", path, " is larger than ",
                                                   max_bytes >= 1024
                                                       ? absl::StrCat(max_bytes / 1024, " KiB")
                                                       : absl::StrCat(max_bytes, " bytes"),
                                                   ": it must hold only ", what));
  }
  std::string secret(absl::StripAsciiWhitespace(content));
  if (secret.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, " is empty: write ", what, " into it"));
  }
  if (secret.size() < min_chars) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", path, ": ", what, " in it is shorter than ", min_chars, " characters"));
  }
  return secret;
}

}  // namespace gantry
