#include "storage/worker_repository.h"

namespace gantry::storage {

absl::StatusOr<std::string> WorkerRepository::Upsert(const gantry::v1::RegisterRequest&) {
  return absl::UnimplementedError("storage: WorkerRepository is being written");
}

absl::Status WorkerRepository::Heartbeat(const std::string&, int, const std::vector<std::string>&, absl::Time) {
  return absl::UnimplementedError("storage: WorkerRepository is being written");
}

absl::StatusOr<gantry::v1::WorkerInfo> WorkerRepository::Get(const std::string&) {
  return absl::UnimplementedError("storage: WorkerRepository is being written");
}

absl::StatusOr<std::vector<gantry::v1::WorkerInfo>> WorkerRepository::List() {
  return absl::UnimplementedError("storage: WorkerRepository is being written");
}

absl::StatusOr<std::vector<std::string>> WorkerRepository::CachedDatasets(const std::string&) {
  return absl::UnimplementedError("storage: WorkerRepository is being written");
}

absl::Status WorkerRepository::MarkDisconnected(const std::string&) {
  return absl::UnimplementedError("storage: WorkerRepository is being written");
}

}  // namespace gantry::storage
