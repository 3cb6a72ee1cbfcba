#include "storage/worker_repository.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "storage/sql_util.h"
#include "storage/transaction.h"

namespace gantry::storage {

namespace {

using gantry::v1::WorkerInfo;

#define WORKER_COLUMNS \
  "id, name, registration, free_slots, connected, gantry_us(last_heartbeat), draining"

absl::StatusOr<WorkerInfo> WorkerFromRow(const pqxx::row& row) {
  gantry::v1::RegisterRequest reg;
  RETURN_IF_ERROR(sql::ParseBytes(row[2], &reg));
  WorkerInfo w;
  w.set_id(row[0].as<std::string>());
  w.set_name(row[1].as<std::string>());
  w.set_slots(reg.slots());
  w.set_free_slots(row[3].as<int>());
  w.set_device(reg.device());
  w.mutable_labels()->insert(reg.labels().begin(), reg.labels().end());
  w.set_advertise_host(reg.advertise_host());
  w.set_connected(row[4].as<bool>());
  sql::SetTimestamp(row[5], w.mutable_last_heartbeat());
  w.set_version(reg.version());
  w.set_draining(row[6].as<bool>());
  return w;
}

absl::Status WorkerNotFound(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("worker ", id, " is not registered; register it again"));
}

}  // namespace

absl::StatusOr<std::string> WorkerRepository::Upsert(const gantry::v1::RegisterRequest& request) {
  if (request.name().empty()) return absl::InvalidArgumentError("a worker needs a name");
  std::vector<std::string> cached(request.cached_datasets().begin(),
                                  request.cached_datasets().end());
  // No secret at rest: the credential a re-registration shows and the generation secret stay in
  // the server's memory (the worker sends both again when it registers with a restarted server).
  gantry::v1::RegisterRequest stored = request;
  stored.clear_previous_credential();
  stored.clear_generation_secret();
  std::string id;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec(
        "worker_upsert",
        "INSERT INTO workers (id, name, registration, slots, free_slots, connected, "
        "cached_datasets, last_heartbeat) VALUES ($1, $2, $3, $4, $4, true, $5::jsonb, now()) "
        "ON CONFLICT (name) DO UPDATE SET registration = EXCLUDED.registration, "
        "slots = EXCLUDED.slots, free_slots = EXCLUDED.free_slots, connected = true, "
        "cached_datasets = EXCLUDED.cached_datasets, last_heartbeat = now() RETURNING id",
        sql::NewId("wrk"), request.name(), sql::Bytes(stored), request.slots(),
        sql::JsonArray(cached));
    id = r[0][0].as<std::string>();
    return absl::OkStatus();
  }));
  return id;
}

absl::Status WorkerRepository::Heartbeat(const std::string& id, int free_slots,
                                         const std::vector<std::string>& cached_datasets,
                                         absl::Time now) {
  return db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r =
        tx.Exec("worker_heartbeat",
                "UPDATE workers SET free_slots = $2, cached_datasets = $3::jsonb, "
                "last_heartbeat = gantry_ts($4), connected = true WHERE id = $1 "
                "RETURNING id",
                id, free_slots, sql::JsonArray(cached_datasets), absl::ToUnixMicros(now));
    if (r.empty()) return WorkerNotFound(id);
    return absl::OkStatus();
  });
}

absl::Status WorkerRepository::SetDraining(const std::string& id, bool draining) {
  return db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec("worker_draining",
                             "UPDATE workers SET draining = $2 WHERE id = $1 RETURNING id", id,
                             draining);
    if (r.empty()) return absl::NotFoundError(absl::StrCat("worker ", id, " is not registered"));
    return absl::OkStatus();
  });
}

absl::StatusOr<WorkerInfo> WorkerRepository::Get(const std::string& id) {
  WorkerInfo w;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r =
        tx.Exec("worker_get", "SELECT " WORKER_COLUMNS " FROM workers WHERE id = $1", id);
    if (r.empty()) return WorkerNotFound(id);
    ASSIGN_OR_RETURN(w, WorkerFromRow(r[0]));
    return absl::OkStatus();
  }));
  return w;
}

absl::StatusOr<std::vector<WorkerInfo>> WorkerRepository::List() {
  std::vector<WorkerInfo> workers;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    workers.clear();
    pqxx::result r = tx.Exec("worker_list", "SELECT " WORKER_COLUMNS " FROM workers ORDER BY name");
    for (const pqxx::row& row : r) {
      ASSIGN_OR_RETURN(WorkerInfo w, WorkerFromRow(row));
      workers.push_back(std::move(w));
    }
    return absl::OkStatus();
  }));
  return workers;
}

absl::StatusOr<std::vector<std::string>> WorkerRepository::CachedDatasets(const std::string& id) {
  std::vector<std::string> cached;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    cached.clear();
    pqxx::result exists = tx.Exec("worker_exists", "SELECT 1 FROM workers WHERE id = $1", id);
    if (exists.empty()) return WorkerNotFound(id);
    pqxx::result r = tx.Exec("worker_cached",
                             "SELECT jsonb_array_elements_text(cached_datasets) FROM workers "
                             "WHERE id = $1",
                             id);
    for (const pqxx::row& row : r) cached.push_back(row[0].as<std::string>());
    return absl::OkStatus();
  }));
  return cached;
}

absl::Status WorkerRepository::MarkDisconnected(const std::string& id) {
  return db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec("worker_disconnect",
                             "UPDATE workers SET connected = false WHERE id = $1 RETURNING id", id);
    if (r.empty()) return WorkerNotFound(id);
    return absl::OkStatus();
  });
}

}  // namespace gantry::storage
