#include "showers/sandboxed_inspector.h"

#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/executable_dir.h"
#include "base/log.h"
#include "showers/inspection_report.h"

namespace gantry::showers {
namespace {

// The user's file name as messages quote it: printable, at most 200 characters.
std::string Quoted(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (out.size() >= 200) break;
    out.push_back(static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? '?' : c);
  }
  return absl::StrCat("\"", out.empty() ? "(unnamed)" : out, "\"");
}

}  // namespace

std::string DefaultInspectBinary() {
  const std::string dir = ExecutableDir();
  return dir.empty() ? "gantry-inspect" : dir + "/gantry-inspect";
}

SandboxedInspector::SandboxedInspector(InspectorOptions options) : options_(std::move(options)) {
  if (options_.binary.empty()) options_.binary = DefaultInspectBinary();
  if (options_.limits.cpu_seconds == 0) {
    options_.limits.cpu_seconds = absl::ToInt64Seconds(options_.timeout) + 1;
  }
}

absl::StatusOr<DatasetInfo> SandboxedInspector::Inspect(const std::string& path,
                                                        const std::string& file_name) const {
  const std::string shown = Quoted(file_name);
  {
    absl::MutexLock lock(&mu_);
    if (!mu_.AwaitWithTimeout(absl::Condition(this, &SandboxedInspector::HasRoom),
                              options_.queue_wait)) {
      return absl::UnavailableError(absl::StrCat(
          "already inspecting ", running_, " other files (the limit, ",
          options_.concurrency_setting, "); could not start on ", options_.subject, " ", shown,
          " within ", absl::FormatDuration(options_.queue_wait), "; try again in a minute"));
    }
    ++running_;
  }
  absl::StatusOr<DatasetInfo> info = RunInspection(path, file_name, shown);
  absl::MutexLock lock(&mu_);
  --running_;
  return info;
}

absl::StatusOr<DatasetInfo> SandboxedInspector::RunInspection(const std::string& path,
                                                              const std::string& file_name,
                                                              const std::string& shown) const {
  SandboxRequest request;
  request.binary = options_.binary;
  // The child names the file by a token that is replaced here, so the client's name never passes
  // through the child's command line unchecked.
  request.args = {"--fd=3", "--name=@FILE@",
                  absl::StrCat("--max-events=", options_.file_limits.max_events),
                  absl::StrCat("--max-dataset-bytes=", options_.file_limits.max_dataset_bytes)};
  request.limits = options_.limits;
  request.timeout = options_.timeout;
  request.max_output_bytes = 16 << 10;
  absl::StatusOr<SandboxResult> run = SandboxedProcess::RunOnFile(path, std::move(request));
  if (absl::IsNotFound(run.status())) {
    GANTRY_LOG(ERROR) << "inspect: cannot open " << path;
    return absl::InternalError(
        absl::StrCat(options_.subject, " ", shown, " could not be opened for inspection"));
  }
  if (!run.ok()) {
    GANTRY_LOG(ERROR) << "inspect: " << run.status();
    return absl::InternalError(absl::StrCat(
        options_.subject, " ", shown,
        " was not read: its inspection helper (gantry-inspect) does not start here; ask the "
        "operator to check ",
        options_.binary_setting));
  }
  if (!run->exited || run->exit_code != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        options_.subject, " ", shown, " could not be read as HDF5: the inspection stopped because ",
        SandboxedProcess::Describe(*run),
        "; the file is damaged or asks for more than is allowed"));
  }
  absl::StatusOr<DatasetInfo> info = ParseInspectionReport(run->output);
  if (absl::IsInternal(info.status())) {
    return absl::InvalidArgumentError(absl::StrCat(options_.subject, " ", shown,
                                                   " could not be read as HDF5: the inspection "
                                                   "gave no usable answer"));
  }
  if (!info.ok()) {
    std::string message(info.status().message());
    for (size_t at; (at = message.find("@FILE@")) != std::string::npos;) {
      message.replace(at, 6, shown);
    }
    return absl::InvalidArgumentError(absl::StrCat("file: not a usable shower file: ", message));
  }
  if (info->particle.empty()) info->particle = ParticleFromFileName(file_name);
  return info;
}

}  // namespace gantry::showers
