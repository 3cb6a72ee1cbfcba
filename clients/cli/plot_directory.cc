#include "clients/cli/plot_directory.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace gantry::cli {
namespace {

bool PlainFileName(const std::string& name) {
  if (name.empty() || name.size() > 100 || name[0] == '.') return false;
  for (char c : name) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.')) return false;
  }
  return true;
}

}  // namespace

absl::Status PlotDirectory::Check(const std::string& path, bool overwrite) {
  if (path.empty()) return absl::InvalidArgumentError("--out: give the folder to write plots into");
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status)) return absl::OkStatus();
  if (!std::filesystem::is_directory(status)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--out ", path, ": exists and is not a folder; choose a folder"));
  }
  if (!overwrite && !std::filesystem::is_empty(path, error)) {
    return absl::FailedPreconditionError(
        absl::StrCat("--out ", path,
                     ": the folder is not empty; choose a new or empty folder, or give --force to "
                     "replace the plot files in it"));
  }
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("--out ", path, ": cannot read the folder: ", error.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PlotDirectory>> PlotDirectory::Open(const std::string& path,
                                                                   bool overwrite) {
  if (absl::Status s = Check(path, overwrite); !s.ok()) return s;
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error) {
    return absl::PermissionDeniedError(
        absl::StrCat("--out ", path, ": cannot create the folder: ", error.message()));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("--out ", path, ": cannot open the folder: ", std::strerror(errno)));
  }
  return std::unique_ptr<PlotDirectory>(new PlotDirectory(path, fd));
}

PlotDirectory::~PlotDirectory() { ::close(fd_); }

absl::Status PlotDirectory::Write(const std::string& file_name, const std::string& bytes) {
  if (!PlainFileName(file_name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("refusing to write \"", file_name, "\": not a plain file name"));
  }
  const int fd = ::openat(fd_, file_name.c_str(),
                          O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot write ", path_, "/", file_name, ": ", std::strerror(errno)));
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int saved = errno;
      ::close(fd);
      return absl::DataLossError(
          absl::StrCat("cannot write ", path_, "/", file_name, ": ", std::strerror(saved)));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) {
    return absl::DataLossError(
        absl::StrCat("cannot write ", path_, "/", file_name, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace gantry::cli
