// DaemonMetrics: the worker daemon's /metrics series of its ranks (what they report over the
// control pipe as RankMetrics) and of its dataset cache, in metrics::ProcessMetrics(). Ranks are
// child processes: they measure, the daemon publishes, so no rank opens a port of its own.
#ifndef GANTRY_WORKERS_AGENT_DAEMON_METRICS_H_
#define GANTRY_WORKERS_AGENT_DAEMON_METRICS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "gantry/v1/worker.pb.h"
#include "workers/runner/dataset_cache.h"

namespace gantry::agent {

// Adds one rank's increments to the daemon's series. `job_id` and `rank` come from the daemon's
// own record of the rank process (never from the message). INVALID_ARGUMENT, recording nothing,
// for negative, NaN or infinite values or more than 1024 step times: a rank is a separate
// process and its bytes are checked like any other input. Thread-safe.
absl::Status RecordRankMetrics(const std::string& job_id, int rank,
                               const gantry::v1::RankMetrics& metrics);

// Drops the per-job gauges of a rank that exited (samples/s, data stall), so an ended job leaves
// no stale values. Thread-safe.
void ForgetRankGauges(const std::string& job_id, int rank);

// Adds what this process's own DatasetCache did since the previous call (the daemon evicts at
// start) to the cache counters, and sets the cache's size gauges. Thread-safe.
void RecordDaemonCache(const runner::DatasetCacheSummary& summary, int64_t max_bytes);

}  // namespace gantry::agent

#endif  // GANTRY_WORKERS_AGENT_DAEMON_METRICS_H_
