// ModelPinRepository: the model versions an admin pinned on serving workers
// (AdminService.LoadModel), kept so that the server re-applies them after its own restart and when
// workers reconnect.
#ifndef GANTRY_STORAGE_MODEL_PIN_REPOSITORY_H_
#define GANTRY_STORAGE_MODEL_PIN_REPOSITORY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gantry/v1/admin.pb.h"
#include "gantry/v1/worker.pb.h"
#include "storage/database.h"

namespace gantry::storage {

// One pinned model version.
struct ModelPin {
  std::string owner;
  std::string name;
  int version = 0;
  gantry::v1::LoadModelRequest request;  // workers, worker_count and batching as asked
  gantry::v1::ServedModel served;        // what a worker needs to load it
};

// Thread-safe (stateless over a Database, which must outlive it).
class ModelPinRepository {
 public:
  explicit ModelPinRepository(Database& db) : db_(db) {}

  // Stores the pin, replacing an earlier one of the same version. NOT_FOUND when the version does
  // not exist (any more).
  absl::Status Put(const ModelPin& pin);
  // Forgets the pin; false when there was none.
  absl::StatusOr<bool> Delete(const std::string& owner, const std::string& name, int version);
  // Every pin, oldest first (at most a few thousand: one per pinned version).
  absl::StatusOr<std::vector<ModelPin>> List();

 private:
  Database& db_;
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_MODEL_PIN_REPOSITORY_H_
