#include "storage/dataset_repository.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "storage/sql_util.h"
#include "storage/transaction.h"

namespace gantry::storage {

namespace {

using gantry::v1::Dataset;

#define DATASET_COLUMNS "id, owner, name, record, gantry_us(created_at), seq"

absl::StatusOr<Dataset> DatasetFromRow(const pqxx::row& row) {
  Dataset d;
  RETURN_IF_ERROR(sql::ParseBytes(row[3], &d));
  d.set_id(row[0].as<std::string>());
  d.set_owner(row[1].as<std::string>());
  d.set_name(row[2].as<std::string>());
  sql::SetTimestamp(row[4], d.mutable_created_at());
  return d;
}

// Finds a dataset by id or (with an owner) by name; prefers an id match.
pqxx::result FindDataset(Transaction& tx, const std::string& owner, const std::string& id_or_name,
                         bool for_update) {
  if (for_update) {
    return tx.Exec("dataset_find_for_update",
                   "SELECT " DATASET_COLUMNS
                   " FROM datasets "
                   "WHERE (id = $2 OR ($1 <> '' AND name = $2)) AND ($1 = '' OR owner = $1) "
                   "ORDER BY (id = $2) DESC LIMIT 1 FOR UPDATE",
                   owner, id_or_name);
  }
  return tx.Exec("dataset_find",
                 "SELECT " DATASET_COLUMNS
                 " FROM datasets "
                 "WHERE (id = $2 OR ($1 <> '' AND name = $2)) AND ($1 = '' OR owner = $1) "
                 "ORDER BY (id = $2) DESC LIMIT 1",
                 owner, id_or_name);
}

absl::Status DatasetNotFound(const std::string& id_or_name) {
  return absl::NotFoundError(absl::StrCat("dataset \"", id_or_name, "\" does not exist"));
}

}  // namespace

absl::StatusOr<Dataset> DatasetRepository::Create(const Dataset& dataset, int64_t max_owner_bytes,
                                                  Blob blob) {
  if (dataset.owner().empty() || dataset.name().empty()) {
    return absl::InvalidArgumentError("a dataset needs an owner and a name");
  }
  Dataset record = dataset;
  if (record.id().empty()) record.set_id(sql::NewId("ds"));
  record.clear_created_at();
  Dataset stored;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    if (max_owner_bytes > 0) {
      tx.Exec("dataset_quota_lock", "SELECT 1 FROM tenants WHERE name = $1 FOR NO KEY UPDATE",
              record.owner());
      pqxx::result used =
          tx.Exec("dataset_quota_bytes",
                  "SELECT COALESCE(sum(size_bytes), 0)::bigint FROM datasets WHERE owner = $1",
                  record.owner());
      const int64_t in_use = used[0][0].as<int64_t>();
      if (record.size_bytes() > max_owner_bytes - in_use) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "limit max_dataset_bytes of tenant \"", record.owner(), "\" is ", max_owner_bytes,
            " bytes; in use: ", in_use, " bytes, this dataset: ", record.size_bytes(),
            " bytes. Delete datasets you no longer need, or ask an admin to raise the limit"));
      }
    }
    if (blob == Blob::kPinned) {
      // The lock orders this with BlobRepository::Collect, which deletes a row under the same
      // lock: either the row is here (and is referenced before this commits) or it is gone.
      pqxx::result pinned = tx.Exec(
          "dataset_blob_lock", "SELECT 1 FROM blobs WHERE sha256 = $1 FOR UPDATE", record.sha256());
      if (pinned.empty()) {
        return absl::AbortedError(
            "the uploaded bytes were deleted by the blob collector before the dataset was "
            "recorded (its inspection took longer than the server's --blob-gc-grace-ms); upload "
            "the file again");
      }
    }
    pqxx::result r = tx.Exec("dataset_create",
                             "INSERT INTO datasets (id, owner, name, sha256, size_bytes, record) "
                             "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (owner, name) DO NOTHING "
                             "RETURNING " DATASET_COLUMNS,
                             record.id(), record.owner(), record.name(), record.sha256(),
                             record.size_bytes(), sql::Bytes(record));
    if (r.empty()) {
      return absl::AlreadyExistsError(absl::StrCat("dataset \"", record.name(),
                                                   "\" already exists; choose another name or "
                                                   "delete the old one first"));
    }
    ASSIGN_OR_RETURN(stored, DatasetFromRow(r[0]));
    return absl::OkStatus();
  }));
  return stored;
}

absl::StatusOr<Dataset> DatasetRepository::Get(const std::string& owner,
                                               const std::string& id_or_name) {
  Dataset d;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = FindDataset(tx, owner, id_or_name, false);
    if (r.empty()) return DatasetNotFound(id_or_name);
    ASSIGN_OR_RETURN(d, DatasetFromRow(r[0]));
    return absl::OkStatus();
  }));
  return d;
}

absl::StatusOr<Page<Dataset>> DatasetRepository::List(const std::string& owner,
                                                      const std::string& name, int page_size,
                                                      const std::string& page_token) {
  ASSIGN_OR_RETURN(int limit, sql::PageSize(page_size));
  int64_t before = 0;
  if (!page_token.empty()) {
    ASSIGN_OR_RETURN(std::vector<std::string> keys,
                     sql::DecodePageToken("datasets", page_token, 1));
    if (!absl::SimpleAtoi(keys[0], &before) || before <= 0) {
      return absl::InvalidArgumentError("page_token is malformed; pass next_page_token unchanged");
    }
  }
  Page<Dataset> page;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    page = {};
    pqxx::result r = tx.Exec("dataset_list",
                             "SELECT " DATASET_COLUMNS
                             " FROM datasets "
                             "WHERE ($1 = '' OR owner = $1) AND ($2 = '' OR name = $2) "
                             "AND ($3::bigint = 0 OR seq < $3) ORDER BY seq DESC LIMIT $4",
                             owner, name, before, limit + 1);
    int64_t last_seq = 0;
    for (size_t i = 0; i < r.size() && static_cast<int>(i) < limit; ++i) {
      ASSIGN_OR_RETURN(Dataset d, DatasetFromRow(r[i]));
      page.items.push_back(std::move(d));
      last_seq = r[i][5].as<int64_t>();
    }
    if (static_cast<int>(r.size()) > limit) {
      page.next_page_token = sql::EncodePageToken("datasets", {absl::StrCat(last_seq)});
    }
    return absl::OkStatus();
  }));
  return page;
}

absl::StatusOr<Dataset> DatasetRepository::Delete(const std::string& owner,
                                                  const std::string& id_or_name) {
  Dataset d;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = FindDataset(tx, owner, id_or_name, true);
    if (r.empty()) return DatasetNotFound(id_or_name);
    ASSIGN_OR_RETURN(d, DatasetFromRow(r[0]));
    pqxx::result users =
        tx.Exec("dataset_users",
                "SELECT id, state FROM jobs WHERE owner = $1 AND dataset IN ($2, $3) "
                "AND state IN ('JOB_STATE_QUEUED', 'JOB_STATE_PLACING', 'JOB_STATE_RUNNING', "
                "'JOB_STATE_RESTARTING', 'JOB_STATE_CANCELLING') "
                "ORDER BY seq LIMIT 1",
                d.owner(), d.id(), d.name());
    if (!users.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "dataset ", d.id(), " is used by job ", users[0][0].c_str(), " (", users[0][1].c_str(),
          "); cancel the job or wait until it ends, then delete the dataset"));
    }
    tx.Exec("dataset_delete", "DELETE FROM datasets WHERE id = $1", d.id());
    return absl::OkStatus();
  }));
  return d;
}

absl::StatusOr<int64_t> DatasetRepository::CountBySha256(const std::string& sha256) {
  int64_t count = 0;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r =
        tx.Exec("dataset_count_sha", "SELECT count(*) FROM datasets WHERE sha256 = $1", sha256);
    count = r[0][0].as<int64_t>();
    return absl::OkStatus();
  }));
  return count;
}

}  // namespace gantry::storage
