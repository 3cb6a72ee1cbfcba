#include "server/requests/pool_requests.h"

#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "base/safe_text.h"
#include "base/status_macros.h"
#include "server/requests/field_checks.h"

namespace gantry::server {
namespace {

absl::Status CheckName(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 63 && absl::ascii_islower(name[0]);
  for (char c : name) ok = ok && (absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-');
  if (!ok) {
    return checks::Invalid("name", absl::StrCat("pool name \"", BoundedField(name),
                                                "\" is invalid; use [a-z][a-z0-9-]{0,62}"));
  }
  return absl::OkStatus();
}

absl::Status CheckAbsolute(const std::string& path, const std::string& field, bool required) {
  if (path.empty() && !required) return absl::OkStatus();
  if (path.empty() || path[0] != '/' || path.size() > 4096 ||
      path.find('\0') != std::string::npos) {
    return checks::Invalid(
        field, absl::StrCat("give an absolute path (got \"", BoundedField(path), "\")"));
  }
  return absl::OkStatus();
}

absl::Status CheckArgv(const google::protobuf::RepeatedPtrField<std::string>& argv,
                       const std::string& field, bool required) {
  if (argv.empty()) {
    return required ? checks::Invalid(field,
                                      "give the command as argv: an absolute path first, "
                                      "then fixed arguments (no shell string)")
                    : absl::OkStatus();
  }
  if (argv.size() > 64) return checks::Invalid(field, "at most 64 arguments");
  RETURN_IF_ERROR(CheckAbsolute(argv[0], absl::StrCat(field, "[0]"), true));
  for (const std::string& arg : argv) {
    if (arg.size() > 4096 || arg.find('\0') != std::string::npos) {
      return checks::Invalid(field, "arguments are at most 4096 bytes, without NUL");
    }
  }
  return absl::OkStatus();
}

absl::Status CheckOptions(const google::protobuf::RepeatedPtrField<std::string>& args,
                          const std::string& field) {
  if (args.size() > 64) return checks::Invalid(field, "at most 64 arguments");
  for (const std::string& arg : args) {
    if (!absl::StartsWith(arg, "--") || arg.size() > 1024 || arg.find('\0') != std::string::npos ||
        arg.find('\n') != std::string::npos) {
      return checks::Invalid(field, absl::StrCat("\"", BoundedField(arg),
                                                 "\" is not an option; give --name=value options "
                                                 "of at most 1024 bytes, one line each"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckSlurm(const gantry::v1::SlurmProvisioner& s) {
  const std::string f = "spec.provisioner.slurm.";
  const size_t colon = s.server_address().rfind(':');
  int port = 0;
  if (s.server_address().empty() || colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(s.server_address().substr(colon + 1), &port) || port < 1 || port > 65535 ||
      !checks::AllChars(s.server_address(), ".:-[]")) {
    return checks::Invalid(f + "server_address",
                           "give host:port the pilots dial to reach gantry-server, e.g. "
                           "head.cluster:50051");
  }
  RETURN_IF_ERROR(CheckAbsolute(s.join_token_file(), f + "join_token_file", true));
  RETURN_IF_ERROR(CheckAbsolute(s.worker_binary(), f + "worker_binary", true));
  RETURN_IF_ERROR(CheckAbsolute(s.slurm_conf(), f + "slurm_conf", false));
  RETURN_IF_ERROR(CheckAbsolute(s.work_dir(), f + "work_dir", false));
  if (s.partition().size() > 64 || !checks::AllChars(s.partition(), "._-")) {
    return checks::Invalid(f + "partition", "use up to 64 characters [A-Za-z0-9._-]");
  }
  RETURN_IF_ERROR(checks::CheckInt(s.time_limit_minutes(), 0, 10080, f + "time_limit_minutes"));
  RETURN_IF_ERROR(checks::CheckInt(s.idle_exit_seconds(), 0, 86400, f + "idle_exit_seconds"));
  RETURN_IF_ERROR(checks::CheckInt(s.timeout_seconds(), 0, 600, f + "timeout_seconds"));
  RETURN_IF_ERROR(CheckOptions(s.sbatch_args(), f + "sbatch_args"));
  return CheckOptions(s.daemon_args(), f + "daemon_args");
}

}  // namespace

absl::Status ValidatePool(const std::string& name, const gantry::v1::PoolSpec& spec) {
  RETURN_IF_ERROR(CheckName(name));
  if (!gantry::v1::DeviceKind_IsValid(spec.device())) {
    return checks::Invalid("spec.device", "use CPU or GPU");
  }
  if (!std::isfinite(spec.price_per_device_hour()) || spec.price_per_device_hour() < 0) {
    return checks::Invalid("spec.price_per_device_hour",
                           absl::StrCat(spec.price_per_device_hour(),
                                        " is not a price; give a number >= 0 (0 = free)"));
  }
  RETURN_IF_ERROR(checks::CheckInt(spec.slots_per_worker(), 0, 256, "spec.slots_per_worker"));
  const bool elastic = spec.provisioner().kind_case() == gantry::v1::ProvisionerSpec::kCommand ||
                       spec.provisioner().kind_case() == gantry::v1::ProvisionerSpec::kSlurm;
  RETURN_IF_ERROR(checks::CheckInt(spec.max_workers(), elastic ? 1 : 0, 10000, "spec.max_workers"));
  RETURN_IF_ERROR(checks::CheckInt(spec.min_workers(), 0, 10000, "spec.min_workers"));
  if (spec.min_workers() > spec.max_workers() && (elastic || spec.max_workers() > 0)) {
    return checks::Invalid(
        "spec.min_workers",
        absl::StrCat("min_workers ", spec.min_workers(), " is above max_workers ",
                     spec.max_workers(), "; lower min_workers or raise max_workers"));
  }
  if (spec.labels_size() > 32) return checks::Invalid("spec.labels", "at most 32 labels");
  for (const auto& [key, value] : spec.labels()) {
    if (key == "pool" || key == "slurm-job") {
      return checks::Invalid(
          "spec.labels", absl::StrCat("\"", BoundedField(key), "\" is set by gantry; remove it"));
    }
    if (key.empty() || key.size() > 63 || value.size() > 63 || !checks::AllChars(key, "._-") ||
        !checks::AllChars(value, "._-")) {
      return checks::Invalid("spec.labels",
                             absl::StrCat("label ", key, "=", value,
                                          " is invalid; keys and values are 1-63 (values 0-63) "
                                          "characters [A-Za-z0-9._-]"));
    }
  }
  switch (spec.provisioner().kind_case()) {
    case gantry::v1::ProvisionerSpec::kCommand: {
      const gantry::v1::CommandProvisioner& c = spec.provisioner().command();
      RETURN_IF_ERROR(CheckArgv(c.scale_up(), "spec.provisioner.command.scale_up", true));
      RETURN_IF_ERROR(CheckArgv(c.scale_down(), "spec.provisioner.command.scale_down", false));
      return checks::CheckInt(c.timeout_seconds(), 0, 3600,
                              "spec.provisioner.command.timeout_seconds");
    }
    case gantry::v1::ProvisionerSpec::kSlurm:
      return CheckSlurm(spec.provisioner().slurm());
    default:
      return absl::OkStatus();
  }
}

scheduler::PoolConfig PoolConfigOf(const gantry::v1::Pool& pool) {
  scheduler::PoolConfig c;
  c.name = pool.name();
  c.device = pool.spec().device();
  c.price_per_device_hour = pool.spec().price_per_device_hour();
  c.preemptible = pool.spec().preemptible();
  c.min_workers = pool.spec().min_workers();
  c.max_workers = pool.spec().max_workers();
  c.slots_per_worker = std::max(1, pool.spec().slots_per_worker());
  c.elastic = pool.spec().provisioner().kind_case() == gantry::v1::ProvisionerSpec::kCommand ||
              pool.spec().provisioner().kind_case() == gantry::v1::ProvisionerSpec::kSlurm;
  c.labels.insert(pool.spec().labels().begin(), pool.spec().labels().end());
  return c;
}

}  // namespace gantry::server
