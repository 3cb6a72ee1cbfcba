#include "storage/model_pin_repository.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "storage/sql_util.h"
#include "storage/transaction.h"

namespace gantry::storage {

absl::Status ModelPinRepository::Put(const ModelPin& pin) {
  return db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result exists = tx.Exec(
        "model_pin_exists", "SELECT 1 FROM models WHERE owner = $1 AND name = $2 AND version = $3",
        pin.owner, pin.name, pin.version);
    if (exists.empty()) {
      return absl::NotFoundError(
          absl::StrCat("model ", pin.owner, "/", pin.name, ":", pin.version, " does not exist"));
    }
    tx.Exec("model_pin_put",
            "INSERT INTO model_pins (owner, name, version, request, served) "
            "VALUES ($1, $2, $3, $4, $5) ON CONFLICT (owner, name, version) DO UPDATE SET "
            "request = EXCLUDED.request, served = EXCLUDED.served, updated_at = now()",
            pin.owner, pin.name, pin.version, sql::Bytes(pin.request), sql::Bytes(pin.served));
    return absl::OkStatus();
  });
}

absl::StatusOr<bool> ModelPinRepository::Delete(const std::string& owner, const std::string& name,
                                                int version) {
  bool deleted = false;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec(
        "model_pin_delete",
        "DELETE FROM model_pins WHERE owner = $1 AND name = $2 AND version = $3 RETURNING 1", owner,
        name, version);
    deleted = !r.empty();
    return absl::OkStatus();
  }));
  return deleted;
}

absl::StatusOr<std::vector<ModelPin>> ModelPinRepository::List() {
  std::vector<ModelPin> pins;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pins.clear();
    pqxx::result r = tx.Exec("model_pin_list",
                             "SELECT owner, name, version, request, served FROM model_pins "
                             "ORDER BY updated_at, owner, name, version LIMIT 10000");
    for (const auto& row : r) {
      ModelPin pin;
      pin.owner = row[0].as<std::string>();
      pin.name = row[1].as<std::string>();
      pin.version = row[2].as<int>();
      RETURN_IF_ERROR(sql::ParseBytes(row[3], &pin.request));
      RETURN_IF_ERROR(sql::ParseBytes(row[4], &pin.served));
      pins.push_back(std::move(pin));
    }
    return absl::OkStatus();
  }));
  return pins;
}

}  // namespace gantry::storage
