#include "storage/file_system.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "base/log.h"

namespace gantry::storage {

namespace {

// The file's name within the blob store only: messages reach clients, which must never learn the
// server's paths. The full path goes to the server's log.
std::string BaseName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

absl::Status ErrnoStatus(const std::string& what, const std::string& path, int err) {
  GANTRY_LOG(ERROR) << "storage: " << what << " " << path << ": " << std::strerror(err);
  std::string msg =
      absl::StrCat(what, " blob store file \"", BaseName(path), "\": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(msg);
  return absl::InternalError(msg);
}

class PosixWritableFile : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);
  }
  absl::Status Append(absl::string_view data) override {
    while (!data.empty()) {
      ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus("cannot write", path_, errno);
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }
  absl::Status Sync() override {
    if (::fsync(fd_) != 0) return ErrnoStatus("cannot fsync", path_, errno);
    return absl::OkStatus();
  }
  absl::Status Close() override {
    if (fd_ < 0) return absl::OkStatus();
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return ErrnoStatus("cannot close", path_, errno);
    return absl::OkStatus();
  }

 private:
  const std::string path_;
  int fd_;
};

class PosixReadableFile : public ReadableFile {
 public:
  PosixReadableFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixReadableFile() override { ::close(fd_); }
  absl::StatusOr<size_t> Read(char* buf, size_t n) override {
    while (true) {
      ssize_t r = ::read(fd_, buf, n);
      if (r < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus("cannot read", path_, errno);
      }
      return static_cast<size_t>(r);
    }
  }
  absl::Status Skip(int64_t n) override {
    if (::lseek(fd_, n, SEEK_CUR) < 0) return ErrnoStatus("cannot seek in", path_, errno);
    return absl::OkStatus();
  }

 private:
  const std::string path_;
  int fd_;
};

class PosixFileSystem : public FileSystem {
 public:
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return ErrnoStatus("cannot create", path, errno);
    return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
  }
  absl::StatusOr<std::unique_ptr<ReadableFile>> NewReadableFile(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("cannot open", path, errno);
    return std::unique_ptr<ReadableFile>(new PosixReadableFile(path, fd));
  }
  absl::Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return ErrnoStatus("cannot rename", from, errno);
    return absl::OkStatus();
  }
  absl::Status Remove(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return ErrnoStatus("cannot remove", path, errno);
    return absl::OkStatus();
  }
  absl::Status CreateDirs(const std::string& path) override {
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (ec) {
      GANTRY_LOG(ERROR) << "storage: cannot create " << path << ": " << ec.message();
      return absl::InternalError(absl::StrCat("cannot create a blob store folder: ", ec.message()));
    }
    return absl::OkStatus();
  }
  absl::Status SyncDir(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("cannot open directory", path, errno);
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (rc != 0) return ErrnoStatus("cannot fsync directory", path, err);
    return absl::OkStatus();
  }
  absl::StatusOr<int64_t> FileSize(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("cannot stat", path, errno);
    return static_cast<int64_t>(st.st_size);
  }
  bool FileExists(const std::string& path) override {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
  }
  absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) override {
    std::error_code ec;
    std::vector<std::string> names;
    for (std::filesystem::directory_iterator it(path, ec), end; !ec && it != end;
         it.increment(ec)) {
      names.push_back(it->path().filename().string());
    }
    if (ec) {
      GANTRY_LOG(ERROR) << "storage: cannot list " << path << ": " << ec.message();
      return absl::InternalError(absl::StrCat("cannot list a blob store folder: ", ec.message()));
    }
    return names;
  }

  absl::StatusOr<absl::Time> ModifiedTime(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, " does not exist"));
      return absl::InternalError(absl::StrCat("cannot stat ", path, ": ", std::strerror(errno)));
    }
    return absl::TimeFromTimespec(st.st_mtim);
  }
};

}  // namespace

absl::StatusOr<absl::Time> FileSystem::ModifiedTime(const std::string& path) {
  return absl::UnimplementedError(absl::StrCat("no modification time for ", path));
}

FileSystem* FileSystem::Default() {
  static FileSystem* const kFs = new PosixFileSystem();
  return kFs;
}

}  // namespace gantry::storage
