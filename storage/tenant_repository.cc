#include "storage/tenant_repository.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "storage/sql_util.h"
#include "storage/transaction.h"

namespace gantry::storage {

namespace {

gantry::v1::Tenant FromRow(const pqxx::row& row) {
  gantry::v1::Tenant t;
  t.set_name(row[0].as<std::string>());
  t.set_admin(row[1].as<bool>());
  sql::SetTimestamp(row[2], t.mutable_created_at());
  return t;
}

}  // namespace

absl::StatusOr<gantry::v1::Tenant> TenantRepository::CreateTenant(const std::string& name,
                                                                  bool admin) {
  if (name.empty()) return absl::InvalidArgumentError("a tenant needs a name");
  gantry::v1::Tenant tenant;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec("tenant_create",
                             "INSERT INTO tenants (name, admin) VALUES ($1, $2) "
                             "ON CONFLICT (name) DO NOTHING "
                             "RETURNING name, admin, gantry_us(created_at)",
                             name, admin);
    if (r.empty()) {
      return absl::AlreadyExistsError(
          absl::StrCat("tenant \"", name, "\" already exists; choose another name"));
    }
    tenant = FromRow(r[0]);
    return absl::OkStatus();
  }));
  return tenant;
}

absl::StatusOr<gantry::v1::Tenant> TenantRepository::GetTenant(const std::string& name) {
  gantry::v1::Tenant tenant;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r =
        tx.Exec("tenant_get",
                "SELECT name, admin, gantry_us(created_at) FROM tenants WHERE name = $1", name);
    if (r.empty()) return absl::NotFoundError(absl::StrCat("tenant \"", name, "\" does not exist"));
    tenant = FromRow(r[0]);
    return absl::OkStatus();
  }));
  return tenant;
}

absl::StatusOr<Page<gantry::v1::Tenant>> TenantRepository::ListTenants(
    int page_size, const std::string& page_token) {
  ASSIGN_OR_RETURN(int limit, sql::PageSize(page_size));
  std::string after;
  if (!page_token.empty()) {
    ASSIGN_OR_RETURN(std::vector<std::string> keys, sql::DecodePageToken("tenants", page_token, 1));
    after = keys[0];
  }
  Page<gantry::v1::Tenant> page;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    page = {};
    pqxx::result r = tx.Exec("tenant_list",
                             "SELECT name, admin, gantry_us(created_at) FROM tenants "
                             "WHERE name > $1 ORDER BY name LIMIT $2",
                             after, limit + 1);
    for (size_t i = 0; i < r.size() && static_cast<int>(i) < limit; ++i) {
      page.items.push_back(FromRow(r[i]));
    }
    if (static_cast<int>(r.size()) > limit) {
      page.next_page_token = sql::EncodePageToken("tenants", {page.items.back().name()});
    }
    return absl::OkStatus();
  }));
  return page;
}

}  // namespace gantry::storage
