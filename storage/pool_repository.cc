#include "storage/pool_repository.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "storage/sql_util.h"
#include "storage/transaction.h"

namespace gantry::storage {
namespace {

constexpr const char* kColumns = "name, spec, gantry_us(created_at), gantry_us(updated_at)";

absl::StatusOr<gantry::v1::Pool> PoolFromRow(const pqxx::row& row) {
  gantry::v1::Pool pool;
  pool.set_name(row[0].as<std::string>());
  RETURN_IF_ERROR(sql::ParseBytes(row[1], pool.mutable_spec()));
  *pool.mutable_created_at() = sql::TimestampFromMicros(row[2].as<int64_t>());
  *pool.mutable_updated_at() = sql::TimestampFromMicros(row[3].as<int64_t>());
  return pool;
}

absl::Status NoSuchPool(const std::string& name) {
  return absl::NotFoundError(
      absl::StrCat("pool \"", name, "\" does not exist (gantry admin pools list)"));
}

}  // namespace

absl::StatusOr<gantry::v1::Pool> PoolRepository::Create(const std::string& name,
                                                        const gantry::v1::PoolSpec& spec) {
  gantry::v1::Pool pool;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec("pool_create",
                             absl::StrCat("INSERT INTO pools (name, spec) VALUES ($1, $2) "
                                          "ON CONFLICT (name) DO NOTHING RETURNING ",
                                          kColumns),
                             name, sql::Bytes(spec));
    if (r.empty()) {
      return absl::AlreadyExistsError(
          absl::StrCat("pool \"", name, "\" exists; update it or choose another name"));
    }
    ASSIGN_OR_RETURN(pool, PoolFromRow(r[0]));
    return absl::OkStatus();
  }));
  return pool;
}

absl::StatusOr<gantry::v1::Pool> PoolRepository::Update(const std::string& name,
                                                        const gantry::v1::PoolSpec& spec) {
  gantry::v1::Pool pool;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec(
        "pool_update",
        absl::StrCat("UPDATE pools SET spec = $2, updated_at = now() WHERE name = $1 RETURNING ",
                     kColumns),
        name, sql::Bytes(spec));
    if (r.empty()) return NoSuchPool(name);
    ASSIGN_OR_RETURN(pool, PoolFromRow(r[0]));
    return absl::OkStatus();
  }));
  return pool;
}

absl::Status PoolRepository::Delete(const std::string& name) {
  return db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec("pool_delete", "DELETE FROM pools WHERE name = $1 RETURNING 1", name);
    return r.empty() ? NoSuchPool(name) : absl::OkStatus();
  });
}

absl::StatusOr<gantry::v1::Pool> PoolRepository::Get(const std::string& name) {
  gantry::v1::Pool pool;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r =
        tx.Exec("pool_get", absl::StrCat("SELECT ", kColumns, " FROM pools WHERE name = $1"), name);
    if (r.empty()) return NoSuchPool(name);
    ASSIGN_OR_RETURN(pool, PoolFromRow(r[0]));
    return absl::OkStatus();
  }));
  return pool;
}

absl::StatusOr<std::vector<gantry::v1::Pool>> PoolRepository::List() {
  std::vector<gantry::v1::Pool> pools;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pools.clear();
    pqxx::result r = tx.Exec(
        "pool_list", absl::StrCat("SELECT ", kColumns, " FROM pools ORDER BY name LIMIT 1000"));
    for (const auto& row : r) {
      ASSIGN_OR_RETURN(gantry::v1::Pool pool, PoolFromRow(row));
      pools.push_back(std::move(pool));
    }
    return absl::OkStatus();
  }));
  return pools;
}

}  // namespace gantry::storage
