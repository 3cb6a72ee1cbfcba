#include "server/requests/worker_requests.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/gpu_ids.h"
#include "base/status_macros.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

using checks::AllChars;
using checks::CheckInt;
using checks::Invalid;

// The GPU ids a worker offers: one rank per GPU, so a GPU worker lists at least as many distinct
// ids as it has slots; a CPU worker lists none.
absl::Status ValidateDevices(const v1::RegisterRequest& request) {
  if (request.device() != v1::DEVICE_KIND_GPU) {
    if (request.device_ids_size() > 0) {
      return Invalid("device_ids",
                     absl::StrCat("lists ", request.device_ids_size(),
                                  " GPU id(s) but device is CPU; register with device GPU "
                                  "(gantry-worker daemon --device=gpu:ID,...) or list no ids"));
    }
    return absl::OkStatus();
  }
  if (request.device_ids_size() == 0) {
    return Invalid("device_ids",
                   "is empty but device is GPU; list the GPU ids this worker offers, one per rank "
                   "(gantry-worker daemon --device=gpu:0,1)");
  }
  std::set<int> seen;
  for (int i = 0; i < request.device_ids_size(); ++i) {
    const std::string field = absl::StrCat("device_ids[", i, "]");
    RETURN_IF_ERROR(CheckInt(request.device_ids(i), 0, kMaxGpuId, field));
    if (!seen.insert(request.device_ids(i)).second) {
      return Invalid(field,
                     absl::StrCat("repeats GPU ", request.device_ids(i), "; list each GPU once"));
    }
  }
  if (request.slots() > request.device_ids_size()) {
    return Invalid("slots", absl::StrCat("is ", request.slots(), " but device_ids lists ",
                                         request.device_ids_size(),
                                         " GPU(s); a GPU rank runs on a GPU of its own, so give "
                                         "at most ",
                                         request.device_ids_size(), " slots or list more GPUs"));
  }
  return absl::OkStatus();
}

// The server calls generation_endpoint with the worker's generation secret: empty (the worker does
// not serve) or the worker's own advertise_host:PORT (as the daemon sets it), never a unix socket,
// another host or an option-like string.
absl::Status ValidateGenerationEndpoint(const v1::RegisterRequest& request) {
  absl::string_view port = request.generation_endpoint();
  if (port.empty()) return absl::OkStatus();
  const std::string& host = request.advertise_host();
  if (!absl::ConsumePrefix(&port, host + ":") && !absl::ConsumePrefix(&port, "[" + host + "]:")) {
    port = "";
  }
  const bool digits =
      !port.empty() && port.size() <= 5 && std::all_of(port.begin(), port.end(), [](char c) {
        return absl::ascii_isdigit(static_cast<unsigned char>(c));
      });
  int number = 0;
  if (!digits || !absl::SimpleAtoi(port, &number) || number < 1 || number > 65535) {
    return Invalid("generation_endpoint",
                   absl::StrCat("must be ", host,
                                ":PORT (this worker's advertise_host and a port "
                                "1..65535), or empty when the worker does not serve"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateRegister(const v1::RegisterRequest& request) {
  if (request.name().empty() || request.name().size() > 128 || !AllChars(request.name(), "._-")) {
    return Invalid("name", "must be 1-128 characters [A-Za-z0-9._-]");
  }
  RETURN_IF_ERROR(CheckInt(request.slots(), 1, 1024, "slots"));
  if (!v1::DeviceKind_IsValid(request.device())) return Invalid("device", "is not a DeviceKind");
  RETURN_IF_ERROR(ValidateDevices(request));
  RETURN_IF_ERROR(CheckInt(request.threads_per_rank(), 0, 1024, "threads_per_rank"));
  RETURN_IF_ERROR(ValidateLabels(request.labels(), "labels"));
  if (request.advertise_host().empty() || request.advertise_host().size() > 255) {
    return Invalid("advertise_host", "is missing; give the host other ranks reach this worker on");
  }
  RETURN_IF_ERROR(ValidateGenerationEndpoint(request));
  for (int i = 0; i < request.cached_datasets_size(); ++i) {
    RETURN_IF_ERROR(
        ValidateSha256(request.cached_datasets(i), absl::StrCat("cached_datasets[", i, "]")));
  }
  if (request.rendezvous_port_min() != 0 || request.rendezvous_port_max() != 0) {
    if (request.rendezvous_port_min() < 1024 || request.rendezvous_port_max() > 65535 ||
        request.rendezvous_port_max() < request.rendezvous_port_min()) {
      return Invalid("rendezvous_port_min",
                     absl::StrCat("the range ", request.rendezvous_port_min(), "..",
                                  request.rendezvous_port_max(),
                                  " is invalid; give 1024 <= min <= max <= 65535 (or 0/0 for "
                                  "the default 29400..29499)"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateCheckpointHeader(const v1::CheckpointHeader& header, int64_t max_bytes) {
  RETURN_IF_ERROR(ValidateId(header.job_id(), "job-", "header.job_id"));
  RETURN_IF_ERROR(ValidateSha256(header.sha256(), "header.sha256"));
  if (header.size_bytes() <= 0 || header.size_bytes() > max_bytes) {
    return Invalid("header.size_bytes",
                   absl::StrCat("is ", header.size_bytes(), "; it must be in 1..", max_bytes));
  }
  RETURN_IF_ERROR(CheckInt(header.epoch(), 0, kMaxEpochs, "header.epoch"));
  if (header.step() < 0) return Invalid("header.step", "must be >= 0");
  RETURN_IF_ERROR(CheckInt(header.attempt(), 0, 1000000, "header.attempt"));
  RETURN_IF_ERROR(CheckInt(header.rank(), 0, 255, "header.rank"));
  if (header.has_fom() && !std::isfinite(header.fom())) {
    return Invalid("header.fom", absl::StrCat("is ", header.fom(),
                                              "; a checkpoint's figure of merit must be finite"));
  }
  return absl::OkStatus();
}

absl::Status ValidateReportValidation(const v1::ReportValidationRequest& request,
                                      size_t max_histogram_bytes) {
  RETURN_IF_ERROR(ValidateId(request.job_id(), "job-", "job_id"));
  RETURN_IF_ERROR(CheckInt(request.attempt(), 0, 1000000, "attempt"));
  RETURN_IF_ERROR(CheckInt(request.rank(), 0, 255, "rank"));
  const v1::ValidationPoint& point = request.point();
  RETURN_IF_ERROR(CheckInt(point.epoch(), 0, kMaxEpochs, "point.epoch"));
  if (point.step() < 0) return Invalid("point.step", "must be >= 0");
  if (point.metrics().empty()) {
    return Invalid("point.metrics", "is empty; a validation point needs its metrics");
  }
  if (point.metrics_size() > kMaxValidationMetrics) {
    return Invalid("point.metrics", absl::StrCat("has ", point.metrics_size(), " entries; at most ",
                                                 kMaxValidationMetrics));
  }
  for (const auto& [name, value] : point.metrics()) {
    if (name.empty() || static_cast<int>(name.size()) > kMaxMetricNameLength ||
        !AllChars(name, "_.-")) {
      return Invalid("point.metrics", absl::StrCat("names must be 1-", kMaxMetricNameLength,
                                                   " characters [A-Za-z0-9_.-]"));
    }
    if (!std::isfinite(value)) {
      return Invalid(absl::StrCat("point.metrics[", name, "]"),
                     absl::StrCat("is ", value,
                                  "; metric values must be finite (leave a metric "
                                  "out when it cannot be computed)"));
    }
  }
  if (point.histograms_size() > kMaxValidationHistograms) {
    return Invalid("point.histograms",
                   absl::StrCat("has ", point.histograms_size(), " entries; at most ",
                                kMaxValidationHistograms));
  }
  size_t bytes = 0;
  for (int i = 0; i < point.histograms_size(); ++i) {
    const v1::Histogram& h = point.histograms(i);
    const std::string field = absl::StrCat("point.histograms[", i, "]");
    if (h.name().empty() || h.name().size() > 128) {
      return Invalid(checks::Sub(field, "name"), "must be 1-128 characters");
    }
    const int bins = std::max(h.reference_size(), h.generated_size());
    if (bins > kMaxHistogramBins || h.edges_size() > kMaxHistogramBins + 1 ||
        h.x_size() > kMaxHistogramBins) {
      return Invalid(field, absl::StrCat("has more than ", kMaxHistogramBins, " bins"));
    }
    bytes += h.ByteSizeLong();
  }
  if (bytes > max_histogram_bytes) {
    return Invalid("point.histograms",
                   absl::StrCat("take ", bytes, " bytes; at most ", max_histogram_bytes,
                                " per point (send fewer or coarser histograms)"));
  }
  return absl::OkStatus();
}

}  // namespace gantry::server
