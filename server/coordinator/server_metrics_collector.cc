#include "server/coordinator/server_metrics_collector.h"

#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/strip.h"
#include "base/log.h"

namespace gantry::server {
namespace {

using metrics::MetricSpec;
using metrics::MetricType;

// The scrape-time gauges.
struct StateFamilies {
  metrics::MetricFamily& jobs;
  metrics::MetricFamily& oldest_queued;
  metrics::MetricFamily& queue_length;
  metrics::MetricFamily& slots;
  metrics::MetricFamily& workers;
  metrics::MetricFamily& db_connections;
  metrics::MetricFamily& db_waiting;
  metrics::MetricFamily& db_acquired;
  metrics::MetricFamily& db_timeouts;
  metrics::MetricFamily& db_wait_seconds;
  metrics::MetricFamily& collect_errors;
};

const StateFamilies& GetStateFamilies() {
  static const StateFamilies* const families = [] {
    metrics::MetricsRegistry& r = metrics::ProcessMetrics();
    MetricSpec jobs =
        metrics::MakeMetricSpec("gantry_jobs", "Jobs in the registry by tenant and state.",
                                MetricType::kGauge, {"tenant", "state"});
    jobs.capped_label = "tenant";
    jobs.max_label_values = kMetricsMaxTenants;
    // Pools are worker labels (a worker's bytes): bounded like tenants.
    MetricSpec slots = metrics::MakeMetricSpec(
        "gantry_slots",
        "Rank slots of connected workers by pool (the worker's pool label, or "
        "\"default\"), device kind and state (total, free, leased).",
        MetricType::kGauge, {"pool", "device", "state"});
    slots.capped_label = "pool";
    slots.max_label_values = 50;
    return new StateFamilies{
        r.Add(jobs),
        r.Gauge("gantry_jobs_oldest_queued_seconds",
                "How long the oldest QUEUED job has waited (0 when none waits)."),
        r.Gauge("gantry_scheduler_queue_length",
                "Jobs waiting in this server's scheduler queue (queued and restarting ones)."),
        r.Add(slots),
        r.Gauge("gantry_workers",
                "Workers registered with this server by state (connected, draining, "
                "disconnected).",
                {"state"}),
        r.Gauge("gantry_db_pool_connections",
                "PostgreSQL pool connections by pool (main, health) and state (in_use, idle).",
                {"pool", "state"}),
        r.Gauge("gantry_db_pool_waiting", "Calls waiting for a free pooled connection now.",
                {"pool"}),
        r.Counter("gantry_db_pool_acquired_total", "Pooled connections handed out.", {"pool"}),
        r.Counter("gantry_db_pool_timeouts_total",
                  "Waits for a pooled connection that gave up (the call failed UNAVAILABLE).",
                  {"pool"}),
        r.Counter("gantry_db_pool_wait_seconds_total",
                  "Time calls spent waiting for a pooled connection.", {"pool"}),
        r.Counter("gantry_metrics_collect_errors_total",
                  "Scrapes whose reading of a source failed (the gauges keep their last values).",
                  {"source"}),
    };
  }();
  return *families;
}

// "JOB_STATE_QUEUED" -> "QUEUED", "DEVICE_KIND_GPU" -> "gpu".
std::string JobStateLabel(gantry::v1::JobState state) {
  return std::string(absl::StripPrefix(gantry::v1::JobState_Name(state), "JOB_STATE_"));
}
std::string DeviceLabel(gantry::v1::DeviceKind kind) {
  return absl::AsciiStrToLower(
      absl::StripPrefix(gantry::v1::DeviceKind_Name(kind), "DEVICE_KIND_"));
}

void RecordPool(const StateFamilies& f, const std::string& pool,
                const storage::Database::PoolStats& stats) {
  f.db_connections.Set({pool, "in_use"}, stats.in_use);
  f.db_connections.Set({pool, "idle"}, stats.size - stats.in_use);
  f.db_waiting.Set({pool}, stats.waiting);
  f.db_acquired.Set({pool}, static_cast<double>(stats.acquired));
  f.db_timeouts.Set({pool}, static_cast<double>(stats.timeouts));
  f.db_wait_seconds.Set({pool}, stats.wait_seconds);
}

}  // namespace

ServerMetricsCollector::ServerMetricsCollector(metrics::MetricsRegistry& registry,
                                               storage::JobRepository& jobs, storage::Database& db,
                                               std::function<CoordinatorSnapshot()> snapshot,
                                               storage::Database* health_db)
    : registry_(registry),
      jobs_(jobs),
      db_(db),
      snapshot_(std::move(snapshot)),
      health_db_(health_db) {
  GetServerMetrics();  // the event series show (at zero) from the first scrape
  GetStateFamilies().collect_errors.Increment({"jobs"}, 0);
  id_ = registry_.AddCollector([this] { Collect(); });
}

ServerMetricsCollector::~ServerMetricsCollector() { registry_.RemoveCollector(id_); }

void ServerMetricsCollector::Collect() {
  const StateFamilies& f = GetStateFamilies();
  // Jobs by tenant and state: one GROUP BY over the jobs table per scrape.
  absl::StatusOr<storage::JobRepository::StateCounts> counts = jobs_.CountByOwnerAndState();
  if (counts.ok()) {
    f.jobs.Clear();
    for (const auto& [key, count] : counts->jobs) {
      // Add, not Set: tenants past the cap share the "other" series.
      f.jobs.Add({key.first, JobStateLabel(key.second)}, static_cast<double>(count));
    }
    f.oldest_queued.Set({}, counts->oldest_queued_seconds);
  } else {
    f.collect_errors.Increment({"jobs"});
    GANTRY_LOG(WARNING) << "metrics: cannot count jobs: " << counts.status().message();
  }

  std::map<std::tuple<std::string, std::string, std::string>, int> slots;
  int connected = 0, draining = 0, disconnected = 0;
  const CoordinatorSnapshot snapshot = snapshot_();
  for (const WorkerView& w : snapshot.workers) {
    if (!w.connected) {
      ++disconnected;
      continue;
    }
    if (w.draining) {
      ++draining;
    } else {
      ++connected;
    }
    const auto pool_label = w.labels.find("pool");
    const std::string pool = pool_label != w.labels.end() && !pool_label->second.empty()
                                 ? pool_label->second
                                 : "default";
    const std::string device = DeviceLabel(w.device);
    slots[{pool, device, "total"}] += w.slots;
    slots[{pool, device, "free"}] += w.free_slots;
    slots[{pool, device, "leased"}] += w.leased_slots;
  }
  f.queue_length.Set({}, snapshot.queued_jobs);
  f.slots.Clear();
  for (const auto& [key, value] : slots) {
    f.slots.Set({std::get<0>(key), std::get<1>(key), std::get<2>(key)}, value);
  }
  f.workers.Set({"connected"}, connected);
  f.workers.Set({"draining"}, draining);
  f.workers.Set({"disconnected"}, disconnected);

  RecordPool(f, "main", db_.Stats());
  if (health_db_ != nullptr) RecordPool(f, "health", health_db_->Stats());
}

}  // namespace gantry::server
