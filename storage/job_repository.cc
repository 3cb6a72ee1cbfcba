#include "storage/job_repository.h"

namespace gantry::storage {

absl::StatusOr<gantry::v1::Job> JobRepository::Create(const std::string&, const gantry::v1::JobSpec&, const std::string&) {
  return absl::UnimplementedError("storage: JobRepository is being written");
}

absl::StatusOr<gantry::v1::Job> JobRepository::Get(const std::string&, const std::string&) {
  return absl::UnimplementedError("storage: JobRepository is being written");
}

absl::StatusOr<Page<gantry::v1::Job>> JobRepository::List(const std::string&, const std::vector<gantry::v1::JobState>&, const std::map<std::string, std::string>&, int, const std::string&) {
  return absl::UnimplementedError("storage: JobRepository is being written");
}

absl::StatusOr<gantry::v1::Job> JobRepository::Transition(const std::string&, const std::vector<gantry::v1::JobState>&, gantry::v1::JobState, const std::string&, const std::string&) {
  return absl::UnimplementedError("storage: JobRepository is being written");
}

absl::StatusOr<int64_t> JobRepository::AppendEvent(const std::string&, const gantry::v1::JobEvent&) {
  return absl::UnimplementedError("storage: JobRepository is being written");
}

absl::StatusOr<std::vector<gantry::v1::JobEvent>> JobRepository::ListEvents(const std::string&, int64_t, int) {
  return absl::UnimplementedError("storage: JobRepository is being written");
}

absl::Status JobRepository::UpdateProgress(const std::string&, const gantry::v1::Progress&) {
  return absl::UnimplementedError("storage: JobRepository is being written");
}

absl::Status JobRepository::SetModelRef(const std::string&, const std::string&) {
  return absl::UnimplementedError("storage: JobRepository is being written");
}

absl::StatusOr<std::vector<gantry::v1::Job>> JobRepository::ListByState(const std::vector<gantry::v1::JobState>&) {
  return absl::UnimplementedError("storage: JobRepository is being written");
}

}  // namespace gantry::storage
