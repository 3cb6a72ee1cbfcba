// MetricsRegistry: the metric families of one process and the collectors that refresh
// scrape-time gauges; renders them as one page in the Prometheus text format.
#ifndef GANTRY_BASE_METRICS_METRICS_REGISTRY_H_
#define GANTRY_BASE_METRICS_METRICS_REGISTRY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "base/metrics/metric_family.h"

namespace gantry::metrics {

// Latency buckets in seconds (1 ms .. 60 s) that the RPC, placement and generation histograms
// share, so dashboards can compare them.
std::vector<double> LatencyBuckets();

// Thread-safe. Families live as long as the registry; the references it returns stay valid.
class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // The family named spec.name, created on first use. Declaring the same name again with the
  // same type and labels returns the existing family (so several servers in one test process
  // share it); an invalid name, label or bucket list, or a clash, is a programming error and
  // aborts with a message naming the metric.
  MetricFamily& Add(MetricSpec spec);
  MetricFamily& Counter(std::string name, std::string help,
                        std::vector<std::string> label_names = {});
  MetricFamily& Gauge(std::string name, std::string help,
                      std::vector<std::string> label_names = {});
  MetricFamily& Histogram(std::string name, std::string help, std::vector<std::string> label_names,
                          std::vector<double> buckets);

  // A collector runs before each rendering (under a lock of its own: one at a time) to refresh
  // gauges that are read from elsewhere at scrape time. Returns an id for RemoveCollector; the
  // owner of what it captures removes it before that goes away.
  int64_t AddCollector(std::function<void()> collect);
  void RemoveCollector(int64_t id);

  // Runs the collectors and renders every family, by name.
  std::string Render();

 private:
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<MetricFamily>> families_ ABSL_GUARDED_BY(mu_);
  absl::Mutex collect_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  std::map<int64_t, std::function<void()>> collectors_ ABSL_GUARDED_BY(collect_mu_);
  int64_t next_collector_ ABSL_GUARDED_BY(collect_mu_) = 1;
};

// The process's registry (created on first use, never destroyed): what its /metrics page shows.
MetricsRegistry& ProcessMetrics();

}  // namespace gantry::metrics

#endif  // GANTRY_BASE_METRICS_METRICS_REGISTRY_H_
