#include "clients/cli/export_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace gantry::cli {
namespace {

absl::Status Errno(const std::string& what, const std::string& path) {
  const int e = errno;
  return absl::Status(e == ENOENT   ? absl::StatusCode::kNotFound
                      : e == EACCES ? absl::StatusCode::kPermissionDenied
                                    : absl::StatusCode::kInternal,
                      absl::StrCat(what, " ", path, ": ", std::strerror(e)));
}

bool Exists(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

bool IsLowerHex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ExportFile>> ExportFile::Create(const std::string& path,
                                                               bool force) {
  if (path.empty()) return absl::InvalidArgumentError("--out: give the file to write");
  if (!force && Exists(path)) {
    return absl::AlreadyExistsError(
        absl::StrCat(path, " exists; give another --out or --force to replace it"));
  }
  return std::unique_ptr<ExportFile>(new ExportFile(path, force));
}

ExportFile::~ExportFile() {
  if (!finished_) Abandon();
}

void ExportFile::Abandon() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (began_) ::unlink(tmp_path().c_str());
  began_ = false;
}

absl::Status ExportFile::Begin(const gantry::v1::ExportMetadata& metadata) {
  if (began_) return absl::InternalError("the server sent the export's metadata twice");
  if (metadata.size_bytes() <= 0 || metadata.size_bytes() > kMaxBytes ||
      !IsLowerHex64(metadata.sha256())) {
    return absl::InternalError(absl::StrCat("the server declared an export of ",
                                            metadata.size_bytes(),
                                            " bytes without a valid sha256; retry"));
  }
  declared_ = metadata.size_bytes();
  declared_sha256_ = metadata.sha256();
  // A stale FILE.tmp of an interrupted run is ours to replace; a link there is not followed.
  fd_ = ::open(tmp_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) return Errno("cannot create", tmp_path());
  began_ = true;
  return absl::OkStatus();
}

absl::Status ExportFile::Append(int64_t offset, const std::string& data) {
  if (!began_) return absl::InternalError("the server sent data before the export's metadata");
  if (offset != written_ || written_ + static_cast<int64_t>(data.size()) > declared_) {
    return absl::DataLossError(absl::StrCat("the server sent bytes at offset ", offset, " after ",
                                            written_, " of ", declared_, " declared; retry"));
  }
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return Errno("cannot write", tmp_path());
    done += static_cast<size_t>(n);
  }
  hash_.Update(data);
  written_ += static_cast<int64_t>(data.size());
  return absl::OkStatus();
}

absl::Status ExportFile::Finish() {
  if (!began_) return absl::InternalError("the server sent no export");
  sha256_ = hash_.HexDigest();
  if (written_ != declared_ || sha256_ != declared_sha256_) {
    const std::string message = absl::StrCat(
        "received ", written_, " bytes with sha256 ", sha256_, "; the server declared ", declared_,
        " bytes with sha256 ", declared_sha256_, "; nothing was written, retry");
    Abandon();
    return absl::DataLossError(message);
  }
  if (::fsync(fd_) != 0) return Errno("cannot flush", tmp_path());
  if (::close(fd_) != 0) {
    fd_ = -1;
    return Errno("cannot write", tmp_path());
  }
  fd_ = -1;
  if (!force_ && Exists(path_)) {
    Abandon();
    return absl::AlreadyExistsError(
        absl::StrCat(path_, " appeared meanwhile; give another --out or --force to replace it"));
  }
  if (::rename(tmp_path().c_str(), path_.c_str()) != 0) {
    return Errno(absl::StrCat("cannot rename ", tmp_path(), " to"), path_);
  }
  finished_ = true;
  return absl::OkStatus();
}

}  // namespace gantry::cli
