// Worker requests: the checks of WorkerService registrations, checkpoint upload headers and
// validation reports.
#ifndef GANTRY_SERVER_REQUESTS_WORKER_REQUESTS_H_
#define GANTRY_SERVER_REQUESTS_WORKER_REQUESTS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "gantry/v1/worker.pb.h"
#include "server/requests/field_checks.h"

namespace gantry::server {

// Name, slots, labels, ports; a GPU worker lists distinct GPU ids 0..kMaxGpuId, at least one per
// slot, a CPU worker none.
absl::Status ValidateRegister(const gantry::v1::RegisterRequest& request);
absl::Status ValidateCheckpointHeader(const gantry::v1::CheckpointHeader& header,
                                      int64_t max_bytes);
// Job id, attempt, rank, epoch, step; at most kMaxValidationMetrics metrics with names
// [A-Za-z0-9_.-]{1,kMaxMetricNameLength} and finite values; at most kMaxValidationHistograms
// histograms of at most kMaxHistogramBins bins, serialized to at most `max_histogram_bytes`.
absl::Status ValidateReportValidation(const gantry::v1::ReportValidationRequest& request,
                                      size_t max_histogram_bytes);

inline constexpr int kMaxValidationMetrics = 128;
inline constexpr int kMaxMetricNameLength = 64;
inline constexpr int kMaxValidationHistograms = 512;
inline constexpr int kMaxHistogramBins = 100000;

}  // namespace gantry::server

#endif  // GANTRY_SERVER_REQUESTS_WORKER_REQUESTS_H_
