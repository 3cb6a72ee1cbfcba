#include "workers/runner/checkpoint_verifier.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace gantry::runner {

std::string FormatVerifyReport(const absl::Status& status) {
  if (status.ok()) return "ok\n";
  return absl::StrCat("error ", static_cast<int>(status.code()), "\n",
                      status.message().substr(0, 4096));
}

absl::Status VerifyCheckpointInChild(const std::string& path, const std::string& what,
                                     const CheckpointVerifierOptions& options) {
  SandboxRequest request;
  request.binary = options.binary.empty() ? "/proc/self/exe" : options.binary;
  request.args = {"verify-checkpoint", "--fd=3"};
  // Set, so that gantry-worker does not re-execute itself to set it (openmp_wait_policy.h): a
  // start of LibTorch costs about a second, and a checkpoint is verified at every upload.
  request.environment = {"OMP_WAIT_POLICY=PASSIVE"};
  request.limits = options.limits;
  request.timeout = options.timeout;
  request.max_output_bytes = 8 << 10;
  absl::StatusOr<SandboxResult> run = SandboxedProcess::RunOnFile(path, std::move(request));
  if (absl::IsNotFound(run.status())) {
    return absl::NotFoundError(absl::StrCat(what, " cannot be opened"));
  }
  if (!run.ok()) return run.status();
  if (!run->exited || run->exit_code != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " could not be loaded safely: ", SandboxedProcess::Describe(*run)));
  }
  const std::string& out = run->output;
  if (out == "ok\n") return absl::OkStatus();
  const size_t eol = out.find('\n');
  int code = 0;
  if (!absl::StartsWith(out, "error ") || eol == std::string::npos ||
      !absl::SimpleAtoi(out.substr(6, eol - 6), &code) || code <= 0 || code > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " could not be loaded safely: its verification gave no usable answer"));
  }
  return absl::Status(static_cast<absl::StatusCode>(code),
                      absl::StrReplaceAll(out.substr(eol + 1), {{"/proc/self/fd/3", what}}));
}

}  // namespace gantry::runner
