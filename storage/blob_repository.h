// BlobRepository: the reference count and last use of every blob, and the garbage collection step.
#ifndef GANTRY_STORAGE_BLOB_REPOSITORY_H_
#define GANTRY_STORAGE_BLOB_REPOSITORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "storage/blob_store.h"
#include "storage/database.h"

namespace gantry::storage {

// What one collection pass did.
struct BlobCollection {
  int64_t adopted = 0;       // blob files found on disk without a row (given a fresh grace period)
  int64_t deleted = 0;       // blobs unlinked
  int64_t temp_removed = 0;  // abandoned partial uploads removed
};

// Thread-safe (stateless over a Database, which must outlive it).
//
// Table `blobs` holds one row per blob: `refs`, the number of rows that use it (datasets, job
// checkpoints not expired by retention, model versions), maintained by triggers in the same
// transaction as those rows, and `touched_at`, when refs last changed or an upload pinned it.
// A blob may be deleted only when refs = 0 and touched_at is older than the grace period.
//
// Protocol that makes collection safe against a concurrent upload of the same bytes: an upload
// calls Pin(sha) before it renames its file to the blob name, and stores the row that uses the
// blob within the grace period after that. Collect locks a blob's row, re-checks refs and
// touched_at, unlinks the file and deletes the row in one transaction, so a Pin either waits for
// it (and the upload's rename then recreates the file) or makes the blob too young to collect.
// An upload that outlasts the grace period (a slow inspection) must not reference the blob
// blindly: the reference triggers would recreate a row for a deleted file. It locks the row first
// (DatasetRepository::Create with Blob::kPinned) and gives up when the row is gone.
class BlobRepository {
 public:
  explicit BlobRepository(Database& db) : db_(db) {}

  // Marks `sha256` as used now (creating its row with refs 0 when missing).
  absl::Status Pin(const std::string& sha256);

  // The reference count of `sha256`; NOT_FOUND when the blob has no row.
  absl::StatusOr<int64_t> Refs(const std::string& sha256);

  // One garbage collection pass over `store`: adopts blob files without a row (refs 0, touched
  // now, so they are collected one grace period later unless something uses them), removes temp
  // files older than `grace`, and deletes up to `limit` blobs with refs 0 untouched for `grace`.
  absl::StatusOr<BlobCollection> Collect(BlobStore& store, absl::Duration grace, int limit = 1000);

 private:
  Database& db_;
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_BLOB_REPOSITORY_H_
