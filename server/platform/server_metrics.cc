#include "server/platform/server_metrics.h"

#include <vector>

namespace gantry::server {

using metrics::MetricSpec;
using metrics::MetricType;

const ServerMetrics& GetServerMetrics() {
  static const ServerMetrics* const server_metrics = [] {
    metrics::MetricsRegistry& r = metrics::ProcessMetrics();
    MetricSpec rpcs = metrics::MakeMetricSpec(
        "gantry_rpc_requests_total",
        "RPCs handled by gantry-server by full method name and status code.", MetricType::kCounter,
        {"method", "code"});
    rpcs.max_series = 500;
    MetricSpec rpc_seconds = metrics::MakeMetricSpec(
        "gantry_rpc_duration_seconds",
        "RPC duration from the first received metadata to the status sent, by method "
        "(streams last as long as the stream).",
        MetricType::kHistogram, {"method"}, metrics::LatencyBuckets());
    rpc_seconds.max_series = 100;
    const std::vector<double> wait_buckets = {0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600};
    return new ServerMetrics{
        r.Add(rpcs),
        r.Add(rpc_seconds),
        r.Histogram("gantry_job_queue_wait_seconds",
                    "Time from a job's submission to its first placement.", {}, wait_buckets),
        r.Histogram("gantry_scheduler_placement_seconds",
                    "Time of one scheduler pass (gang placement of the queue), per tick.", {},
                    metrics::LatencyBuckets()),
        r.Histogram("gantry_job_gang_start_seconds",
                    "Time from placing a job to all of its ranks running (dataset, rendezvous).",
                    {}, wait_buckets),
        r.Counter("gantry_generation_requests_total", "Generate calls by status code.", {"code"}),
        r.Counter("gantry_generation_showers_total", "Showers streamed to Generate clients."),
        r.Histogram("gantry_generation_duration_seconds",
                    "Duration of whole Generate calls by status code.", {"code"},
                    metrics::LatencyBuckets()),
    };
  }();
  return *server_metrics;
}

}  // namespace gantry::server
