#include "base/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace gantry {
namespace {

absl::Status Unavailable(absl::string_view what, const std::string& path, int error) {
  return absl::UnavailableError(absl::StrCat(what, " ", path, ": ", std::strerror(error)));
}

// Writes all of `data` to fd, retrying short writes and EINTR; false with errno set on failure.
bool WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path,
                                 std::initializer_list<absl::string_view> pieces,
                                 ExistingFile existing, int mode) {
  const std::string tmp = path + ".tmp";
  ::unlink(tmp.c_str());  // a stale one; a symlink is removed, not followed
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0) return Unavailable("cannot create", tmp, errno);
  for (absl::string_view piece : pieces) {
    if (!WriteAll(fd, piece)) {
      const int error = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Unavailable("cannot write", tmp, error);
    }
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int error = errno;
    ::unlink(tmp.c_str());
    return Unavailable("cannot write", tmp, error);
  }
  if (existing == ExistingFile::kReplace) {
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      const int error = errno;
      ::unlink(tmp.c_str());
      return Unavailable("cannot rename into", path, error);
    }
    return absl::OkStatus();
  }
  // link() fails with EEXIST if the name was taken, also by a file that appeared meanwhile.
  const int linked = ::link(tmp.c_str(), path.c_str());
  const int error = errno;
  ::unlink(tmp.c_str());
  if (linked != 0) {
    if (error == EEXIST) {
      return absl::AlreadyExistsError(absl::StrCat(path, " exists"));
    }
    return Unavailable("cannot create", path, error);
  }
  return absl::OkStatus();
}

}  // namespace gantry
