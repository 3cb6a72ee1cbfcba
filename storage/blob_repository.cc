#include "storage/blob_repository.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "storage/transaction.h"

namespace gantry::storage {

absl::Status BlobRepository::Pin(const std::string& sha256) {
  if (!BlobStore::IsValidSha256(sha256)) {
    return absl::InvalidArgumentError("a blob is named by 64 lower-case hex digits");
  }
  return db_.Transact([&](Transaction& tx) -> absl::Status {
    tx.Exec("blob_pin",
            "INSERT INTO blobs (sha256, refs) VALUES ($1, 0) "
            "ON CONFLICT (sha256) DO UPDATE SET touched_at = now()",
            sha256);
    return absl::OkStatus();
  });
}

absl::StatusOr<int64_t> BlobRepository::Refs(const std::string& sha256) {
  int64_t refs = 0;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec("blob_refs", "SELECT refs FROM blobs WHERE sha256 = $1", sha256);
    if (r.empty()) return absl::NotFoundError(absl::StrCat("blob ", sha256, " has no row"));
    refs = r[0][0].as<int64_t>();
    return absl::OkStatus();
  }));
  return refs;
}

absl::StatusOr<BlobCollection> BlobRepository::Collect(BlobStore& store, absl::Duration grace,
                                                       int limit) {
  BlobCollection done;
  const int64_t grace_us = absl::ToInt64Microseconds(grace);

  // Files without a row: left by a version before reference counts, or a checkpoint stored
  // while the database was down. They get a full grace period from now.
  ASSIGN_OR_RETURN(std::vector<std::string> on_disk, store.List());
  constexpr size_t kBatch = 500;
  for (size_t begin = 0; begin < on_disk.size(); begin += kBatch) {
    const size_t end = std::min(on_disk.size(), begin + kBatch);
    RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
      int64_t adopted = 0;
      for (size_t i = begin; i < end; ++i) {
        pqxx::result r = tx.Exec("blob_adopt",
                                 "INSERT INTO blobs (sha256, refs) VALUES ($1, 0) "
                                 "ON CONFLICT (sha256) DO NOTHING",
                                 on_disk[i]);
        adopted += r.affected_rows();
      }
      done.adopted += adopted;
      return absl::OkStatus();
    }));
  }

  ASSIGN_OR_RETURN(done.temp_removed, store.RemoveTempFilesOlderThan(absl::Now() - grace));

  // One transaction per blob: the row lock is held while the file is unlinked, so a concurrent
  // Pin or a new reference waits and then sees the row gone (and recreates it).
  for (int i = 0; i < limit; ++i) {
    bool deleted = false;
    bool none_left = false;
    RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
      deleted = none_left = false;
      pqxx::result r =
          tx.Exec("blob_collect_next",
                  "SELECT sha256 FROM blobs WHERE refs = 0 AND "
                  "touched_at < clock_timestamp() - $1::bigint * interval '1 microsecond' "
                  "ORDER BY touched_at LIMIT 1 FOR UPDATE SKIP LOCKED",
                  grace_us);
      if (r.empty()) {
        none_left = true;
        return absl::OkStatus();
      }
      const std::string sha = r[0][0].as<std::string>();
      if (BlobStore::IsValidSha256(sha)) {
        absl::Status removed = store.Remove(sha);
        if (!removed.ok() && !absl::IsNotFound(removed)) return removed;
      }
      tx.Exec("blob_collect_delete", "DELETE FROM blobs WHERE sha256 = $1", sha);
      deleted = true;
      return absl::OkStatus();
    }));
    if (none_left) break;
    if (deleted) ++done.deleted;
  }
  return done;
}

}  // namespace gantry::storage
