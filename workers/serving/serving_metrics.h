// ServingMetrics: the generation series of the worker daemon's /metrics page, declared once in the
// process registry (base/metrics) and shared by every model's batcher.
#ifndef GANTRY_WORKERS_SERVING_SERVING_METRICS_H_
#define GANTRY_WORKERS_SERVING_SERVING_METRICS_H_

#include "base/metrics/metric_family.h"

namespace gantry::serving {

struct ServingMetrics {
  metrics::MetricFamily& batches;      // counter {outcome: ok|error}
  metrics::MetricFamily& showers;      // counter: showers generated in successful batches
  metrics::MetricFamily& batch_size;   // histogram: showers per batch
  metrics::MetricFamily& queue_delay;  // histogram: the oldest waiting shower's wait, seconds
  metrics::MetricFamily& compute;      // histogram: the backend's time per batch, seconds
};

// The families in metrics::ProcessMetrics() (declared on first use; thread-safe).
const ServingMetrics& GetServingMetrics();

}  // namespace gantry::serving

#endif  // GANTRY_WORKERS_SERVING_SERVING_METRICS_H_
