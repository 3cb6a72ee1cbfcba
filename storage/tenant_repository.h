// TenantRepository: the tenants (name, admin flag) that own jobs, datasets, models and tokens.
#ifndef GANTRY_STORAGE_TENANT_REPOSITORY_H_
#define GANTRY_STORAGE_TENANT_REPOSITORY_H_

#include <string>

#include "absl/status/statusor.h"
#include "gantry/v1/admin.pb.h"
#include "storage/database.h"
#include "storage/page.h"

namespace gantry::storage {

// Thread-safe (stateless over a Database, which must outlive it). Names are not validated here (the
// server checks [a-z][a-z0-9-]{0,62}); storage only guarantees uniqueness.
class TenantRepository {
 public:
  explicit TenantRepository(Database& db) : db_(db) {}

  // ALREADY_EXISTS when the name is taken.
  absl::StatusOr<gantry::v1::Tenant> CreateTenant(const std::string& name, bool admin);
  // NOT_FOUND when there is no such tenant.
  absl::StatusOr<gantry::v1::Tenant> GetTenant(const std::string& name);
  // Ordered by name.
  absl::StatusOr<Page<gantry::v1::Tenant>> ListTenants(int page_size,
                                                       const std::string& page_token);

 private:
  Database& db_;
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_TENANT_REPOSITORY_H_
