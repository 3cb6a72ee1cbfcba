// BlobReader: streams a stored blob in chunks and checks its sha256 when it reaches the end.
#ifndef GANTRY_STORAGE_BLOB_READER_H_
#define GANTRY_STORAGE_BLOB_READER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "base/sha256.h"
#include "storage/file_system.h"

namespace gantry::storage {

// Not thread-safe; one reader per download. Obtained from BlobStore::Open.
class BlobReader {
 public:
  ~BlobReader();
  BlobReader(const BlobReader&) = delete;
  BlobReader& operator=(const BlobReader&) = delete;

  // Returns the next chunk of at most max_bytes (> 0). At the end of the file the whole-file hash
  // is checked: an empty string means "end, and the bytes were intact"; DATA_LOSS means the stored
  // bytes do not match the blob's name (every chunk already returned must then be discarded). A
  // size change during the read is DATA_LOSS too.
  absl::StatusOr<std::string> Read(size_t max_bytes);

  const std::string& sha256() const { return sha256_; }
  int64_t size_bytes() const { return size_; }  // of the whole blob
  int64_t offset() const { return offset_; }    // of the next byte Read returns

 private:
  friend class BlobStore;
  BlobReader(std::string sha256, int64_t size, std::unique_ptr<ReadableFile> file);
  // Hashes (and discards) the first `offset` bytes.
  absl::Status SkipTo(int64_t offset);

  const std::string sha256_;
  const int64_t size_;
  std::unique_ptr<ReadableFile> file_;
  Sha256 sha_;
  int64_t offset_ = 0;
  bool done_ = false;
  absl::Status end_status_;  // the hash check result, repeated by every Read after the end
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_BLOB_READER_H_
