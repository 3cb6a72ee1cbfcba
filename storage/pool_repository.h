// PoolRepository: the pools of workers an admin defined (AdminService.CreatePool), by name.
#ifndef GANTRY_STORAGE_POOL_REPOSITORY_H_
#define GANTRY_STORAGE_POOL_REPOSITORY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gantry/v1/admin.pb.h"
#include "storage/database.h"

namespace gantry::storage {

// Thread-safe (stateless over a Database, which must outlive it). Pools come back with name, spec
// and times; their status is the server's to fill.
class PoolRepository {
 public:
  explicit PoolRepository(Database& db) : db_(db) {}

  // ALREADY_EXISTS when the name is taken. The spec is stored as given (validate it first).
  absl::StatusOr<gantry::v1::Pool> Create(const std::string& name,
                                          const gantry::v1::PoolSpec& spec);
  // Replaces the spec; NOT_FOUND for an unknown pool.
  absl::StatusOr<gantry::v1::Pool> Update(const std::string& name,
                                          const gantry::v1::PoolSpec& spec);
  // NOT_FOUND for an unknown pool.
  absl::Status Delete(const std::string& name);
  // NOT_FOUND for an unknown pool.
  absl::StatusOr<gantry::v1::Pool> Get(const std::string& name);
  // Every pool by name (at most 1000).
  absl::StatusOr<std::vector<gantry::v1::Pool>> List();

 private:
  Database& db_;
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_POOL_REPOSITORY_H_
