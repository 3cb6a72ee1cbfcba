// ServerMetricsCollector: the scrape-time gauges of gantry-server's /metrics page (jobs by state
// and tenant, slots, workers, the database pools), read from the coordinator's state and the
// database.
#ifndef GANTRY_SERVER_COORDINATOR_SERVER_METRICS_COLLECTOR_H_
#define GANTRY_SERVER_COORDINATOR_SERVER_METRICS_COLLECTOR_H_

#include <cstdint>

#include "base/metrics/metrics_registry.h"
#include "server/coordinator/coordinator_state.h"
#include "server/platform/backend.h"
#include "server/platform/server_metrics.h"
#include "storage/database.h"

namespace gantry::server {

// Refreshes the scrape-time gauges of one server while registered (its constructor adds it to
// `registry`, its destructor removes it). `backend` and `state` must outlive it.
class ServerMetricsCollector {
 public:
  ServerMetricsCollector(metrics::MetricsRegistry& registry, Backend& backend,
                         CoordinatorState& state, storage::Database* health_db);
  ~ServerMetricsCollector();
  ServerMetricsCollector(const ServerMetricsCollector&) = delete;
  ServerMetricsCollector& operator=(const ServerMetricsCollector&) = delete;

 private:
  void Collect();

  metrics::MetricsRegistry& registry_;
  Backend& backend_;
  CoordinatorState& state_;
  storage::Database* const health_db_;
  int64_t id_ = 0;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_COORDINATOR_SERVER_METRICS_COLLECTOR_H_
