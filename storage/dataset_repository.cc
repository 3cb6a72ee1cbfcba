#include "storage/dataset_repository.h"

namespace gantry::storage {

absl::StatusOr<gantry::v1::Dataset> DatasetRepository::Create(const gantry::v1::Dataset&) {
  return absl::UnimplementedError("storage: DatasetRepository is being written");
}

absl::StatusOr<gantry::v1::Dataset> DatasetRepository::Get(const std::string&, const std::string&) {
  return absl::UnimplementedError("storage: DatasetRepository is being written");
}

absl::StatusOr<Page<gantry::v1::Dataset>> DatasetRepository::List(const std::string&, const std::string&, int, const std::string&) {
  return absl::UnimplementedError("storage: DatasetRepository is being written");
}

absl::StatusOr<gantry::v1::Dataset> DatasetRepository::Delete(const std::string&, const std::string&) {
  return absl::UnimplementedError("storage: DatasetRepository is being written");
}

absl::StatusOr<int64_t> DatasetRepository::CountBySha256(const std::string&) {
  return absl::UnimplementedError("storage: DatasetRepository is being written");
}

}  // namespace gantry::storage
