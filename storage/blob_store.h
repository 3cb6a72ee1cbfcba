// BlobStore: content-addressed files (checkpoints, datasets) under <data_dir>/blobs/ab/abcdef... .
#ifndef GANTRY_STORAGE_BLOB_STORE_H_
#define GANTRY_STORAGE_BLOB_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "storage/blob_reader.h"
#include "storage/blob_writer.h"
#include "storage/file_system.h"

namespace gantry::storage {

// Thread-safe. A blob is named by the lower-case hex SHA-256 of its bytes and stored at
// <data_dir>/blobs/<first 2 hex>/<64 hex>. Writers stage into <data_dir>/blobs/tmp/ (same
// filesystem) and rename only after the file and directories are fsynced, so a crash never leaves a
// partial blob under a blob name. Writing the same content twice is fine (same name, same bytes).
// Errors: INVALID_ARGUMENT for a string that is not 64 lower-case hex digits, NOT_FOUND for a
// missing blob, DATA_LOSS when stored bytes do not match their name.
class BlobStore {
 public:
  // Creates the directories when missing and removes stale temp files of earlier runs. `fs`
  // defaults to FileSystem::Default() and must outlive the store.
  static absl::StatusOr<std::unique_ptr<BlobStore>> Create(const std::string& data_dir,
                                                           FileSystem* fs = nullptr);

  // A writer for a new blob (see BlobWriter).
  absl::StatusOr<std::unique_ptr<BlobWriter>> NewWriter();

  // A reader over the blob's bytes from `offset` (0..size). The hash is checked over the whole file
  // (bytes before `offset` are read and hashed too) when the reader reaches the end.
  absl::StatusOr<std::unique_ptr<BlobReader>> Open(const std::string& sha256, int64_t offset = 0);

  // Reads the whole blob and checks its hash: OK, NOT_FOUND or DATA_LOSS.
  absl::Status Verify(const std::string& sha256);

  bool Exists(const std::string& sha256);
  absl::StatusOr<int64_t> Size(const std::string& sha256);
  // NOT_FOUND when absent.
  absl::Status Remove(const std::string& sha256);
  // The sha256 of every stored blob (temp files not included), in no particular order.
  absl::StatusOr<std::vector<std::string>> List();
  // Removes temp files (uploads under way or abandoned) last modified before `cutoff`; returns how
  // many it removed. A temp file still being written is newer than any sensible cutoff.
  absl::StatusOr<int> RemoveTempFilesOlderThan(absl::Time cutoff);
  // Where the blob lives (whether or not it exists). Precondition: a valid sha256.
  std::string Path(const std::string& sha256) const;

  const std::string& data_dir() const { return data_dir_; }

  // True for 64 lower-case hex digits.
  static bool IsValidSha256(const std::string& sha256);

 private:
  BlobStore(std::string data_dir, FileSystem* fs);

  const std::string data_dir_;
  const std::string blobs_dir_;
  const std::string tmp_dir_;
  FileSystem* const fs_;
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_BLOB_STORE_H_
