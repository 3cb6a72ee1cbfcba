#include "server/pools/slurm_provisioner.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "base/log.h"
#include "server/pools/command_runner.h"

namespace gantry::server {
namespace {

// A Slurm job id ("123") or array task ("123_4"), at most 32 characters.
bool IsSlurmJobId(const std::string& value) {
  if (value.empty() || value.size() > 32) return false;
  bool underscore = false;
  for (size_t i = 0; i < value.size(); ++i) {
    if (absl::ascii_isdigit(static_cast<unsigned char>(value[i]))) continue;
    if (value[i] != '_' || underscore || i == 0 || i + 1 == value.size()) return false;
    underscore = true;
  }
  return true;
}

// 'value' for a POSIX shell (a ' inside becomes '\'').
std::string Quote(const std::string& value) {
  return absl::StrCat("'", absl::StrReplaceAll(value, {{"'", "'\\''"}}), "'");
}

}  // namespace

std::string SlurmProvisioner::JobName(const std::string& pool) {
  return absl::StrCat("gantry-pilot-", pool);
}

std::string SlurmProvisioner::PilotScript(const std::string& pool) const {
  const std::string work_dir = spec_.work_dir().empty() ? "/tmp" : spec_.work_dir();
  const int idle = spec_.idle_exit_seconds() > 0 ? spec_.idle_exit_seconds() : 300;
  // Pool names and label keys/values are [A-Za-z0-9._-] (validated), so they are safe unquoted
  // next to ${SLURM_JOB_ID}, which must stay outside single quotes to expand.
  std::string labels = absl::StrCat("pool=", pool, ",slurm-job=${SLURM_JOB_ID}");
  for (const auto& [key, value] : labels_) absl::StrAppend(&labels, ",", key, "=", value);
  std::string script = absl::StrCat(
      "#!/bin/sh\n# gantry pilot of pool ", pool, ": one gantry-worker daemon for the wall time.\n",
      "mkdir -p ", Quote(work_dir), " || exit 1\n",  //
      // The daemon's cache: a new directory of mode 0700 and unguessable name (the work directory
      // may be a shared /tmp, where a predictable name could be taken first by another user).
      "cache=\"$(mktemp -d ", Quote(work_dir),
      "\"/gantry-pilot-${SLURM_JOB_ID}-XXXXXX\")\" || exit 1\n", "exec ",
      Quote(spec_.worker_binary()), " daemon",  //
      " ", Quote("--server=" + spec_.server_address()), " ",
      Quote("--join-token-file=" + spec_.join_token_file()), " \"--name=", pool,
      "-pilot-${SLURM_JOB_ID}\"",                                                             //
      " ", Quote(absl::StrCat("--slots=", slots_per_worker_)), " \"--labels=", labels, "\"",  //
      " ", Quote(absl::StrCat("--idle-exit-after=", idle, "s")), " ", "\"--cache-dir=$cache\"");
  for (const std::string& arg : spec_.daemon_args()) absl::StrAppend(&script, " ", Quote(arg));
  absl::StrAppend(&script, "\n");
  return script;
}

absl::Status SlurmProvisioner::ScaleUp(const std::string& pool, int count) {
  const std::string work_dir = spec_.work_dir().empty() ? "/tmp" : spec_.work_dir();
  std::vector<std::string> argv = {
      "sbatch",
      "--parsable",
      "--job-name=" + JobName(pool),
      absl::StrCat("--time=", spec_.time_limit_minutes() > 0 ? spec_.time_limit_minutes() : 60),
      "--nodes=1",
      "--ntasks=1",
      absl::StrCat("--cpus-per-task=", slots_per_worker_),
      "--output=" + work_dir + "/gantry-pilot-%A_%a.log",
      absl::StrCat("--array=0-", count - 1)};
  if (!spec_.partition().empty()) argv.push_back("--partition=" + spec_.partition());
  argv.insert(argv.end(), spec_.sbatch_args().begin(), spec_.sbatch_args().end());
  return Run(argv, PilotScript(pool));
}

absl::Status SlurmProvisioner::ScaleDown(const std::string& pool,
                                         const std::vector<ProvisionedWorker>& workers) {
  // The slurm-job label comes from the worker (its registration): only a Slurm job id ("123") or
  // array task ("123_4") reaches scancel, after "--" (never an option).
  std::vector<std::string> argv = {"scancel", "--"};
  for (const ProvisionedWorker& w : workers) {
    auto it = w.labels.find("slurm-job");
    if (it == w.labels.end() || it->second.empty()) continue;
    if (!IsSlurmJobId(it->second)) {
      GANTRY_LOG(WARNING) << "pool " << pool << ": worker label slurm-job="
                          << absl::CHexEscape(it->second.substr(0, 64))
                          << " is not a Slurm job id; not cancelled";
      continue;
    }
    argv.push_back(it->second);
  }
  if (argv.size() == 2) return absl::OkStatus();  // none is a pilot (started by hand)
  absl::Status status = Run(argv, "");
  // A pilot that ended by itself meanwhile (its idle exit, its wall time) is already gone.
  if (!status.ok() && (absl::StrContains(status.message(), "already completing or completed") ||
                       absl::StrContains(status.message(), "Invalid job id"))) {
    return absl::OkStatus();
  }
  return status;
}

absl::Status SlurmProvisioner::CancelPending(const std::string& pool) {
  return Run({"scancel", "--state=PENDING", "--name=" + JobName(pool)}, "");
}

absl::Status SlurmProvisioner::Run(const std::vector<std::string>& argv,
                                   const std::string& stdin_data) {
  CommandRequest request;
  request.argv = argv;
  request.stdin_data = stdin_data;
  if (!spec_.slurm_conf().empty()) request.env["SLURM_CONF"] = spec_.slurm_conf();
  request.timeout = absl::Seconds(spec_.timeout_seconds() > 0 ? spec_.timeout_seconds() : 30);
  request.cancelled = cancelled_;
  absl::StatusOr<CommandOutcome> outcome = CommandRunner::Run(request);
  if (!outcome.ok()) {
    return absl::UnavailableError(
        absl::StrCat(argv[0], " could not start: ", outcome.status().message()));
  }
  if (outcome->ok()) return absl::OkStatus();
  if (outcome->exited && outcome->exit_code == 127) {
    return absl::UnavailableError(absl::StrCat(
        argv[0], " not found on the server's PATH: install slurm-client (and munge) there"));
  }
  if (outcome->timed_out) {
    return absl::DeadlineExceededError(absl::StrCat(argv[0], " timed out after ",
                                                    absl::FormatDuration(request.timeout),
                                                    " (is slurmctld reachable?) and was killed"));
  }
  return absl::UnavailableError(absl::StrCat("Slurm: ", argv[0], " ", outcome->Describe()));
}

}  // namespace gantry::server
