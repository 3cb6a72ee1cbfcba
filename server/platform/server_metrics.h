// ServerMetrics: the series of gantry-server's /metrics page. The event series (RPCs, queue waits,
// placement, generation) are recorded where they happen; the state gauges (jobs by state and
// tenant, slots, workers, the database pool) are read at scrape time by ServerMetricsCollector
// (coordinator/).
#ifndef GANTRY_SERVER_PLATFORM_SERVER_METRICS_H_
#define GANTRY_SERVER_PLATFORM_SERVER_METRICS_H_

#include <cstdint>

#include "base/metrics/metric_family.h"
#include "base/metrics/metrics_registry.h"

namespace gantry::server {

// Tenants named in per-tenant series; the rest are counted as tenant="other".
inline constexpr int kMetricsMaxTenants = 100;

// Families in metrics::ProcessMetrics(), declared on first use.
struct ServerMetrics {
  metrics::MetricFamily& rpcs;                 // counter {method, code}
  metrics::MetricFamily& rpc_seconds;          // histogram {method}
  metrics::MetricFamily& queue_wait;           // histogram: submit -> first placement
  metrics::MetricFamily& schedule_seconds;     // histogram: one scheduler pass
  metrics::MetricFamily& gang_start_seconds;   // histogram: placed -> every rank running
  metrics::MetricFamily& generation_requests;  // counter {code}
  metrics::MetricFamily& generation_showers;   // counter: showers streamed to clients
  metrics::MetricFamily& generation_seconds;   // histogram {code}: whole Generate calls
};
const ServerMetrics& GetServerMetrics();

}  // namespace gantry::server

#endif  // GANTRY_SERVER_PLATFORM_SERVER_METRICS_H_
