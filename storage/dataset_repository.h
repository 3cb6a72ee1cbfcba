// DatasetRepository: metadata of uploaded datasets (the bytes live in the BlobStore by sha256).
#ifndef GANTRY_STORAGE_DATASET_REPOSITORY_H_
#define GANTRY_STORAGE_DATASET_REPOSITORY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gantry/v1/datasets.pb.h"
#include "storage/database.h"
#include "storage/page.h"

namespace gantry::storage {

// Thread-safe (stateless over a Database, which must outlive it). Names are unique per owner.
// `owner` arguments: a tenant name restricts to that tenant (another tenant's dataset is
// NOT_FOUND); the empty string means "any owner" (admins, workers fetching a dataset for a job).
class DatasetRepository {
 public:
  explicit DatasetRepository(Database& db) : db_(db) {}

  // Stores `dataset` (owner and name required, INVALID_ARGUMENT otherwise). Assigns id "ds-<uuid>"
  // when empty and created_at. ALREADY_EXISTS when the owner already has a dataset of that name.
  // With `max_owner_bytes` > 0, RESOURCE_EXHAUSTED when the owner's datasets would then hold
  // more bytes than that (checked under a lock on the owner, so concurrent uploads never exceed
  // it). The row's blob reference is counted in the same transaction (see BlobRepository).
  // With `blob` kPinned (an upload, which pinned its blob before inspecting it), the blob's row
  // is locked first and ABORTED comes back when it is gone: more than the collector's grace
  // period passed since the pin, so the collector deleted the bytes, and no dataset may name them.
  enum class Blob { kAny, kPinned };
  absl::StatusOr<gantry::v1::Dataset> Create(const gantry::v1::Dataset& dataset,
                                             int64_t max_owner_bytes = 0, Blob blob = Blob::kAny);

  // By id ("ds-...") or by name within `owner`'s namespace (by name needs a non-empty owner).
  absl::StatusOr<gantry::v1::Dataset> Get(const std::string& owner, const std::string& id_or_name);

  // Newest first; `name` non-empty = exact name only.
  absl::StatusOr<Page<gantry::v1::Dataset>> List(const std::string& owner, const std::string& name,
                                                 int page_size, const std::string& page_token);

  // Deletes the record (id or name). FAILED_PRECONDITION while a QUEUED/PLACING/RUNNING/RESTARTING/
  // CANCELLING job of that owner has spec.dataset equal to the dataset's id or name. The blob
  // reference goes in the same transaction; the bytes stay until the collector deletes them
  // (BlobRepository::Collect). Returns the deleted record.
  absl::StatusOr<gantry::v1::Dataset> Delete(const std::string& owner,
                                             const std::string& id_or_name);

  // How many dataset records (any owner) reference the blob `sha256`.
  absl::StatusOr<int64_t> CountBySha256(const std::string& sha256);

 private:
  Database& db_;
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_DATASET_REPOSITORY_H_
