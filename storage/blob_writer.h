// BlobWriter: streams one new blob into a temp file and publishes it under its sha256 on Commit.
#ifndef GANTRY_STORAGE_BLOB_WRITER_H_
#define GANTRY_STORAGE_BLOB_WRITER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/sha256.h"
#include "storage/file_system.h"

namespace gantry::storage {

// What a committed blob is.
struct BlobInfo {
  std::string sha256;
  int64_t size_bytes = 0;
};

// Not thread-safe; one writer per upload. Obtained from BlobStore::NewWriter. Destroying a writer
// that was not committed aborts it (removes the temp file); a crash leaves only a temp file, which
// the next BlobStore::Create removes.
class BlobWriter {
 public:
  ~BlobWriter();
  BlobWriter(const BlobWriter&) = delete;
  BlobWriter& operator=(const BlobWriter&) = delete;

  absl::Status Append(absl::string_view data);
  int64_t bytes_written() const { return size_; }

  // Fsyncs the temp file, checks the hash and renames it to its blob path (then fsyncs the
  // directories). With `expected_sha256`, a different hash of the received bytes is DATA_LOSS ("the
  // received bytes hash to X, not the expected Y") and nothing is stored. After Commit (successful
  // or not) the writer is finished; further calls are FAILED_PRECONDITION. `before_publish`, when
  // given, runs with the hash after the bytes are durable and before the rename (the server pins
  // the blob against garbage collection there); an error from it aborts the commit.
  absl::StatusOr<BlobInfo> Commit(
      const std::optional<std::string>& expected_sha256 = std::nullopt,
      const std::function<absl::Status(const std::string& sha256)>& before_publish = nullptr);

  // Drops the temp file. Idempotent.
  void Abort();

 private:
  friend class BlobStore;
  BlobWriter(FileSystem* fs, std::string tmp_path, std::string blobs_dir,
             std::unique_ptr<WritableFile> file);

  FileSystem* const fs_;
  const std::string tmp_path_;
  const std::string blobs_dir_;
  std::unique_ptr<WritableFile> file_;
  Sha256 sha_;
  int64_t size_ = 0;
  bool finished_ = false;
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_BLOB_WRITER_H_
