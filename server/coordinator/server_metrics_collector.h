// ServerMetricsCollector: the scrape-time gauges of gantry-server's /metrics page (jobs by state
// and tenant, slots, workers, the database pools), read from the coordinator's snapshot and the
// database.
#ifndef GANTRY_SERVER_COORDINATOR_SERVER_METRICS_COLLECTOR_H_
#define GANTRY_SERVER_COORDINATOR_SERVER_METRICS_COLLECTOR_H_

#include <cstdint>
#include <functional>

#include "base/metrics/metrics_registry.h"
#include "server/coordinator/coordinator_views.h"
#include "server/platform/server_metrics.h"
#include "storage/database.h"
#include "storage/job_repository.h"

namespace gantry::server {

// Refreshes the scrape-time gauges of one server while registered (its constructor adds it to
// `registry`, its destructor removes it). `jobs` and `db` must outlive it; `snapshot` is called at
// each scrape (JobCoordinator::Snapshot).
class ServerMetricsCollector {
 public:
  // `db`: the main connection pool, whose stats it reports (and `health_db`'s, when not null).
  ServerMetricsCollector(metrics::MetricsRegistry& registry, storage::JobRepository& jobs,
                         storage::Database& db, std::function<CoordinatorSnapshot()> snapshot,
                         storage::Database* health_db);
  ~ServerMetricsCollector();
  ServerMetricsCollector(const ServerMetricsCollector&) = delete;
  ServerMetricsCollector& operator=(const ServerMetricsCollector&) = delete;

 private:
  void Collect();

  metrics::MetricsRegistry& registry_;
  storage::JobRepository& jobs_;  // jobs by tenant and state
  storage::Database& db_;
  const std::function<CoordinatorSnapshot()> snapshot_;
  storage::Database* const health_db_;
  int64_t id_ = 0;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_COORDINATOR_SERVER_METRICS_COLLECTOR_H_
