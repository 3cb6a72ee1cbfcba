#include "server/pools/command_provisioner.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/pools/command_runner.h"

namespace gantry::server {

absl::Status CommandProvisioner::ScaleUp(const std::string& pool, int count) {
  return Run("scale-up", {spec_.scale_up().begin(), spec_.scale_up().end()}, pool, count, {});
}

absl::Status CommandProvisioner::ScaleDown(const std::string& pool,
                                           const std::vector<ProvisionedWorker>& workers) {
  if (spec_.scale_down().empty()) return absl::OkStatus();
  std::vector<std::string> names;
  for (const ProvisionedWorker& w : workers) names.push_back(w.name);
  return Run("scale-down", {spec_.scale_down().begin(), spec_.scale_down().end()}, pool,
             static_cast<int>(workers.size()), names);
}

absl::Status CommandProvisioner::Run(const char* what, const std::vector<std::string>& argv,
                                     const std::string& pool, int count,
                                     const std::vector<std::string>& names) {
  CommandRequest request;
  request.argv = argv;
  request.argv.push_back(pool);
  request.argv.push_back(absl::StrCat(count));
  request.argv.insert(request.argv.end(), names.begin(), names.end());
  request.env = {{"GANTRY_POOL", pool},
                 {"GANTRY_COUNT", absl::StrCat(count)},
                 {"GANTRY_WORKERS", absl::StrJoin(names, " ")}};
  request.timeout = absl::Seconds(spec_.timeout_seconds() > 0 ? spec_.timeout_seconds() : 60);
  request.cancelled = cancelled_;
  absl::StatusOr<CommandOutcome> outcome = CommandRunner::Run(request);
  if (!outcome.ok()) {
    return absl::UnavailableError(
        absl::StrCat(what, " command ", argv[0], " could not start: ", outcome.status().message()));
  }
  if (outcome->ok()) return absl::OkStatus();
  if (outcome->timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(what, " command ", argv[0], " timed out after ",
                                                    absl::FormatDuration(request.timeout),
                                                    " and was killed"));
  }
  return absl::UnavailableError(
      absl::StrCat(what, " command ", argv[0], " failed: ", outcome->Describe()));
}

}  // namespace gantry::server
