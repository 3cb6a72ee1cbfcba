// RankMetricsReporter: gathers what a rank measures (step times, data waits, all-reduce time,
// samples, its dataset cache's counters) and sends the increments to its daemon as RankMetrics
// over the control pipe, at most once per interval; the daemon publishes them on /metrics.
#ifndef GANTRY_WORKERS_RUNNER_RANK_METRICS_REPORTER_H_
#define GANTRY_WORKERS_RUNNER_RANK_METRICS_REPORTER_H_

#include <cstdint>
#include <functional>

#include "absl/time/time.h"
#include "gantry/v1/worker.pb.h"
#include "workers/runner/dataset_cache.h"

namespace gantry::runner {

// Not thread-safe: the training thread owns it.
class RankMetricsReporter {
 public:
  using Send = std::function<void(const gantry::v1::WorkerMessage&)>;

  RankMetricsReporter(Send send, absl::Duration interval);

  // One training step: its wall time, the part spent waiting for the batch, this rank's samples,
  // and the all-reduce seconds summed over the run so far (DataParallelStats; 0 without it).
  // Sends when the interval has passed since the previous send.
  void OnStep(double seconds, double data_wait_seconds, int64_t samples,
              double allreduce_seconds_total);
  // Sends whatever is pending (the cache counters too) now; nothing when there is nothing new.
  void Flush();

 private:
  void FillCacheIncrements(gantry::v1::RankMetrics* metrics);

  const Send send_;
  const absl::Duration interval_;
  absl::Time last_sent_ = absl::InfinitePast();
  gantry::v1::RankMetrics pending_;
  double allreduce_reported_ = 0;
  double run_seconds_ = 0;  // this process's step time and data wait so far
  double run_wait_seconds_ = 0;
  // What was sent of this process's cache counters (all of them are this rank's: one per process).
  DatasetCacheCounters cache_reported_;
};

}  // namespace gantry::runner

#endif  // GANTRY_WORKERS_RUNNER_RANK_METRICS_REPORTER_H_
