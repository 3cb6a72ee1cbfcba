#include "storage/model_repository.h"

namespace gantry::storage {

absl::StatusOr<gantry::v1::ModelVersion> ModelRepository::Register(const gantry::v1::ModelVersion&) {
  return absl::UnimplementedError("storage: ModelRepository is being written");
}

absl::StatusOr<gantry::v1::ModelVersion> ModelRepository::Resolve(const std::string&, const std::string&) {
  return absl::UnimplementedError("storage: ModelRepository is being written");
}

absl::StatusOr<Page<gantry::v1::ModelVersion>> ModelRepository::List(const std::string&, const ModelFilter&, int, const std::string&) {
  return absl::UnimplementedError("storage: ModelRepository is being written");
}

absl::StatusOr<gantry::v1::ModelVersion> ModelRepository::SetAlias(const std::string&, const std::string&, const std::string&, int) {
  return absl::UnimplementedError("storage: ModelRepository is being written");
}

absl::Status ModelRepository::DeleteAlias(const std::string&, const std::string&, const std::string&) {
  return absl::UnimplementedError("storage: ModelRepository is being written");
}

absl::StatusOr<gantry::v1::ModelVersion> ModelRepository::SetTags(const std::string&, const std::string&, const std::map<std::string, std::string>&, const std::vector<std::string>&) {
  return absl::UnimplementedError("storage: ModelRepository is being written");
}

absl::StatusOr<gantry::v1::ModelVersion> ModelRepository::Archive(const std::string&, const std::string&) {
  return absl::UnimplementedError("storage: ModelRepository is being written");
}

}  // namespace gantry::storage
