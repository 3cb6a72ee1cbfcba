// ExportFile: where `gantry models export` writes a streamed export: FILE.tmp, checked against the
// metadata's size and sha256, then renamed to FILE. An existing FILE is refused unless `force`.
#ifndef GANTRY_CLIENTS_CLI_EXPORT_FILE_H_
#define GANTRY_CLIENTS_CLI_EXPORT_FILE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "base/sha256.h"
#include "gantry/v1/catalog.pb.h"

namespace gantry::cli {

// Not thread-safe. Destroying an unfinished ExportFile removes FILE.tmp; FILE is untouched until
// Finish succeeds.
class ExportFile {
 public:
  // Largest export the CLI accepts (a declared size beyond it is refused before writing).
  static constexpr int64_t kMaxBytes = int64_t{16} << 30;

  // ALREADY_EXISTS "FILE exists; give another --out or --force" when FILE exists and !force;
  // the file system's errors naming the path otherwise. Creates nothing yet.
  static absl::StatusOr<std::unique_ptr<ExportFile>> Create(const std::string& path, bool force);
  ~ExportFile();
  ExportFile(const ExportFile&) = delete;
  ExportFile& operator=(const ExportFile&) = delete;

  // The first chunk: the metadata (its size bounded by kMaxBytes and a sha256); opens FILE.tmp.
  absl::Status Begin(const gantry::v1::ExportMetadata& metadata);
  // A data chunk at `offset` (the next one, never past the declared size).
  absl::Status Append(int64_t offset, const std::string& data);
  // Checks size and sha256 against the metadata, flushes to disk and renames FILE.tmp to FILE.
  // DATA_LOSS when they differ (FILE.tmp removed).
  absl::Status Finish();

  const std::string& path() const { return path_; }
  std::string tmp_path() const { return path_ + ".tmp"; }
  int64_t bytes() const { return written_; }
  const std::string& sha256() const { return sha256_; }

 private:
  ExportFile(std::string path, bool force) : path_(std::move(path)), force_(force) {}
  void Abandon();

  const std::string path_;
  const bool force_;
  int fd_ = -1;
  bool began_ = false;
  bool finished_ = false;
  int64_t declared_ = 0;
  std::string declared_sha256_;
  int64_t written_ = 0;
  Sha256 hash_;
  std::string sha256_;  // after Finish
};

}  // namespace gantry::cli

#endif  // GANTRY_CLIENTS_CLI_EXPORT_FILE_H_
