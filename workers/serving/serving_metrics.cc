#include "workers/serving/serving_metrics.h"

#include "base/metrics/metrics_registry.h"

namespace gantry::serving {

const ServingMetrics& GetServingMetrics() {
  static const ServingMetrics* const serving_metrics = [] {
    metrics::MetricsRegistry& registry = metrics::ProcessMetrics();
    return new ServingMetrics{
        registry.Counter("gantry_worker_generation_batches_total",
                         "Generator batches run by the dynamic batcher, by outcome (ok, error).",
                         {"outcome"}),
        registry.Counter("gantry_worker_generation_showers_total",
                         "Showers generated in successful batches."),
        registry.Histogram("gantry_worker_generation_batch_size",
                           "Showers per generator batch (its mean is sum / count).", {},
                           {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}),
        registry.Histogram("gantry_worker_generation_queue_delay_seconds",
                           "How long the oldest shower of a batch waited before the batch ran.", {},
                           metrics::LatencyBuckets()),
        registry.Histogram("gantry_worker_generation_compute_seconds",
                           "Generator time per batch (backend RunBatch).", {},
                           metrics::LatencyBuckets()),
    };
  }();
  return *serving_metrics;
}

}  // namespace gantry::serving
