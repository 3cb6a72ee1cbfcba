// FileSystem: the tiny file I/O interface under the BlobStore, so tests can inject faults.
#ifndef GANTRY_STORAGE_FILE_SYSTEM_H_
#define GANTRY_STORAGE_FILE_SYSTEM_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace gantry::storage {

// A file open for appending. Not thread-safe. Destroying it closes it.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual absl::Status Append(absl::string_view data) = 0;
  virtual absl::Status Sync() = 0;  // fsync
  virtual absl::Status Close() = 0;
};

// A file open for sequential reading. Not thread-safe.
class ReadableFile {
 public:
  virtual ~ReadableFile() = default;
  // Reads up to n bytes into buf; returns how many (0 at end of file).
  virtual absl::StatusOr<size_t> Read(char* buf, size_t n) = 0;
  virtual absl::Status Skip(int64_t n) = 0;
};

// File operations the blob store needs. Implementations must be thread-safe. Errors: NOT_FOUND for
// a missing file, INTERNAL (with errno text) otherwise. Messages name only the file's base name
// (they may reach clients); the full path is written to stderr (the server log).
class FileSystem {
 public:
  virtual ~FileSystem() = default;
  // Creates (or truncates) a file for writing, mode 0600.
  virtual absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(
      const std::string& path) = 0;
  virtual absl::StatusOr<std::unique_ptr<ReadableFile>> NewReadableFile(
      const std::string& path) = 0;
  // Atomically replaces `to` with `from` (rename(2)).
  virtual absl::Status Rename(const std::string& from, const std::string& to) = 0;
  virtual absl::Status Remove(const std::string& path) = 0;
  // mkdir -p.
  virtual absl::Status CreateDirs(const std::string& path) = 0;
  // fsync of a directory, making renames inside it durable.
  virtual absl::Status SyncDir(const std::string& path) = 0;
  virtual absl::StatusOr<int64_t> FileSize(const std::string& path) = 0;
  virtual bool FileExists(const std::string& path) = 0;
  // Names (not paths) of the entries of a directory.
  virtual absl::StatusOr<std::vector<std::string>> ListDir(const std::string& path) = 0;
  // When the file was last modified. UNIMPLEMENTED unless overridden.
  virtual absl::StatusOr<absl::Time> ModifiedTime(const std::string& path);

  // The real POSIX implementation (a process-wide singleton; never deleted).
  static FileSystem* Default();
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_FILE_SYSTEM_H_
