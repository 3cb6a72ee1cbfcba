#include "workers/agent/daemon_metrics.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "base/metrics/metrics_registry.h"

namespace gantry::agent {
namespace {

// The most step times one RankMetrics may carry (a rank reports every few seconds).
constexpr int kMaxStepTimes = 1024;

struct Families {
  metrics::MetricFamily& steps;
  metrics::MetricFamily& step_seconds;
  metrics::MetricFamily& data_wait_seconds;
  metrics::MetricFamily& allreduce_seconds;
  metrics::MetricFamily& samples;
  metrics::MetricFamily& samples_per_second;
  metrics::MetricFamily& data_stall_fraction;
  metrics::MetricFamily& cache_hits;
  metrics::MetricFamily& cache_misses;
  metrics::MetricFamily& cache_filled_bytes;
  metrics::MetricFamily& cache_evictions;
  metrics::MetricFamily& cache_evicted_bytes;
  metrics::MetricFamily& cache_bytes;
};

metrics::MetricSpec Spec(const char* name, const char* help, metrics::MetricType type,
                         std::vector<std::string> labels, std::vector<double> buckets = {}) {
  metrics::MetricSpec spec =
      metrics::MakeMetricSpec(name, help, type, std::move(labels), std::move(buckets));
  spec.max_series = 256;  // ranks are bounded by the daemon's slots; jobs by what runs at once
  return spec;
}

const Families& Get() {
  using metrics::MetricType;
  static const Families* const families = [] {
    metrics::MetricsRegistry& r = metrics::ProcessMetrics();
    const std::vector<double> step_buckets = {0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                              1,    2.5,   5,    10,  30,   60};
    return new Families{
        r.Add(Spec("gantry_worker_rank_steps_total", "Training steps completed by ranks here.",
                   MetricType::kCounter, {"rank"})),
        r.Add(Spec("gantry_worker_rank_step_seconds", "Wall time of one training step of a rank.",
                   MetricType::kHistogram, {"rank"}, step_buckets)),
        r.Add(Spec("gantry_worker_rank_data_wait_seconds_total",
                   "Time ranks' steps waited for their batches (the data stall).",
                   MetricType::kCounter, {"rank"})),
        r.Add(Spec("gantry_worker_rank_allreduce_seconds_total",
                   "Gradient all-reduce wall time of ranks (0 for world_size 1).",
                   MetricType::kCounter, {"rank"})),
        r.Add(Spec("gantry_worker_rank_samples_total", "Real samples ranks trained on.",
                   MetricType::kCounter, {"rank"})),
        r.Add(Spec("gantry_worker_rank_samples_per_second",
                   "Latest training rate of a running rank (its own batch).", MetricType::kGauge,
                   {"job_id", "rank"})),
        r.Add(Spec("gantry_worker_rank_data_stall_fraction",
                   "Share of a running rank's step time spent waiting for data, so far.",
                   MetricType::kGauge, {"job_id", "rank"})),
        r.Add(Spec("gantry_worker_dataset_cache_hits_total",
                   "Dataset cache lookups answered by a complete, verified entry.",
                   MetricType::kCounter, {})),
        r.Add(Spec("gantry_worker_dataset_cache_misses_total",
                   "Dataset cache lookups that had to fill (download or generate) the entry.",
                   MetricType::kCounter, {})),
        r.Add(Spec("gantry_worker_dataset_cache_filled_bytes_total",
                   "Bytes written into the dataset cache by fills.", MetricType::kCounter, {})),
        r.Add(Spec("gantry_worker_dataset_cache_evictions_total",
                   "Dataset cache entries evicted to stay under --cache-max-bytes.",
                   MetricType::kCounter, {})),
        r.Add(Spec("gantry_worker_dataset_cache_evicted_bytes_total",
                   "Bytes of the evicted dataset cache entries.", MetricType::kCounter, {})),
        r.Add(Spec("gantry_worker_dataset_cache_bytes",
                   "Dataset cache size: kind=used (complete entries) or kind=limit.",
                   MetricType::kGauge, {"kind"})),
    };
  }();
  return *families;
}

bool Valid(double value) { return std::isfinite(value) && value >= 0; }

absl::Mutex g_cache_mu;
// What RecordDaemonCache last added of this process's own cache counters.
runner::DatasetCacheCounters g_cache_recorded ABSL_GUARDED_BY(g_cache_mu);

}  // namespace

absl::Status RecordRankMetrics(const std::string& job_id, int rank,
                               const gantry::v1::RankMetrics& m) {
  const std::vector<double> values = {static_cast<double>(m.steps()),
                                      m.step_seconds(),
                                      m.data_wait_seconds(),
                                      m.allreduce_seconds(),
                                      static_cast<double>(m.samples()),
                                      m.samples_per_second(),
                                      m.data_stall_fraction(),
                                      static_cast<double>(m.cache_hits()),
                                      static_cast<double>(m.cache_misses()),
                                      static_cast<double>(m.cache_filled_bytes()),
                                      static_cast<double>(m.cache_evictions()),
                                      static_cast<double>(m.cache_evicted_bytes())};
  for (const double v : values) {
    if (!Valid(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank, " of ", job_id, " sent a negative or non-finite metric"));
    }
  }
  if (m.step_seconds_each_size() > kMaxStepTimes) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " of ", job_id, " sent ",
                                                   m.step_seconds_each_size(),
                                                   " step times (at most ", kMaxStepTimes, ")"));
  }
  for (const double v : m.step_seconds_each()) {
    if (!Valid(v)) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", rank, " of ", job_id, " sent a negative or non-finite step time"));
    }
  }
  const Families& f = Get();
  const std::string rank_label = std::to_string(rank);
  f.steps.Increment({rank_label}, static_cast<double>(m.steps()));
  for (const double v : m.step_seconds_each()) f.step_seconds.Observe({rank_label}, v);
  f.data_wait_seconds.Increment({rank_label}, m.data_wait_seconds());
  f.allreduce_seconds.Increment({rank_label}, m.allreduce_seconds());
  f.samples.Increment({rank_label}, static_cast<double>(m.samples()));
  if (m.steps() > 0) {
    f.samples_per_second.Set({job_id, rank_label}, m.samples_per_second());
    f.data_stall_fraction.Set({job_id, rank_label}, std::min(1.0, m.data_stall_fraction()));
  }
  f.cache_hits.Increment({}, static_cast<double>(m.cache_hits()));
  f.cache_misses.Increment({}, static_cast<double>(m.cache_misses()));
  f.cache_filled_bytes.Increment({}, static_cast<double>(m.cache_filled_bytes()));
  f.cache_evictions.Increment({}, static_cast<double>(m.cache_evictions()));
  f.cache_evicted_bytes.Increment({}, static_cast<double>(m.cache_evicted_bytes()));
  return absl::OkStatus();
}

void ForgetRankGauges(const std::string& job_id, int rank) {
  const Families& f = Get();
  const std::string rank_label = std::to_string(rank);
  f.samples_per_second.Remove({job_id, rank_label});
  f.data_stall_fraction.Remove({job_id, rank_label});
}

void RecordDaemonCache(const runner::DatasetCacheSummary& summary, int64_t max_bytes) {
  const Families& f = Get();
  const runner::DatasetCacheCounters now = runner::ProcessDatasetCacheCounters();
  {
    absl::MutexLock lock(&g_cache_mu);
    f.cache_hits.Increment({}, static_cast<double>(now.hits - g_cache_recorded.hits));
    f.cache_misses.Increment({}, static_cast<double>(now.misses - g_cache_recorded.misses));
    f.cache_filled_bytes.Increment(
        {}, static_cast<double>(now.filled_bytes - g_cache_recorded.filled_bytes));
    f.cache_evictions.Increment({},
                                static_cast<double>(now.evictions - g_cache_recorded.evictions));
    f.cache_evicted_bytes.Increment(
        {}, static_cast<double>(now.evicted_bytes - g_cache_recorded.evicted_bytes));
    g_cache_recorded = now;
  }
  f.cache_bytes.Set({"used"}, static_cast<double>(summary.bytes));
  f.cache_bytes.Set({"limit"}, static_cast<double>(max_bytes));
}

}  // namespace gantry::agent
