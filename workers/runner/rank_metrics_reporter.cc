#include "workers/runner/rank_metrics_reporter.h"

#include <utility>

#include "absl/time/clock.h"

namespace gantry::runner {
namespace {

// The daemon refuses more step times per message (workers/agent/daemon_metrics.h).
constexpr int kMaxStepTimes = 1024;

}  // namespace

RankMetricsReporter::RankMetricsReporter(Send send, absl::Duration interval)
    : send_(std::move(send)), interval_(interval) {}

void RankMetricsReporter::OnStep(double seconds, double data_wait_seconds, int64_t samples,
                                 double allreduce_seconds_total) {
  pending_.set_steps(pending_.steps() + 1);
  pending_.set_step_seconds(pending_.step_seconds() + seconds);
  pending_.set_data_wait_seconds(pending_.data_wait_seconds() + data_wait_seconds);
  pending_.set_samples(pending_.samples() + samples);
  if (pending_.step_seconds_each_size() < kMaxStepTimes) pending_.add_step_seconds_each(seconds);
  if (allreduce_seconds_total > allreduce_reported_) {
    pending_.set_allreduce_seconds(pending_.allreduce_seconds() + allreduce_seconds_total -
                                   allreduce_reported_);
    allreduce_reported_ = allreduce_seconds_total;
  }
  run_seconds_ += seconds;
  run_wait_seconds_ += data_wait_seconds;
  pending_.set_samples_per_second(seconds > 0 ? static_cast<double>(samples) / seconds : 0);
  pending_.set_data_stall_fraction(run_seconds_ > 0 ? run_wait_seconds_ / run_seconds_ : 0);
  const absl::Time now = absl::Now();
  if (now - last_sent_ >= interval_ || pending_.step_seconds_each_size() >= kMaxStepTimes) {
    Flush();
  }
}

void RankMetricsReporter::FillCacheIncrements(gantry::v1::RankMetrics* metrics) {
  const DatasetCacheCounters now = ProcessDatasetCacheCounters();
  metrics->set_cache_hits(now.hits - cache_reported_.hits);
  metrics->set_cache_misses(now.misses - cache_reported_.misses);
  metrics->set_cache_filled_bytes(now.filled_bytes - cache_reported_.filled_bytes);
  metrics->set_cache_evictions(now.evictions - cache_reported_.evictions);
  metrics->set_cache_evicted_bytes(now.evicted_bytes - cache_reported_.evicted_bytes);
  cache_reported_ = now;
}

void RankMetricsReporter::Flush() {
  FillCacheIncrements(&pending_);
  const bool empty = pending_.steps() == 0 && pending_.cache_hits() == 0 &&
                     pending_.cache_misses() == 0 && pending_.cache_evictions() == 0;
  last_sent_ = absl::Now();
  if (empty) return;
  gantry::v1::WorkerMessage message;
  *message.mutable_rank_metrics() = pending_;
  send_(message);
  const double samples_per_second = pending_.samples_per_second();
  const double stall = pending_.data_stall_fraction();
  pending_.Clear();
  // The latest rate and stall stay current for the next message.
  pending_.set_samples_per_second(samples_per_second);
  pending_.set_data_stall_fraction(stall);
}

}  // namespace gantry::runner
