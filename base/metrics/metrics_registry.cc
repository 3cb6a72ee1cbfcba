#include "base/metrics/metrics_registry.h"

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/match.h"
#include "base/metrics/prometheus_text.h"

namespace gantry::metrics {
namespace {

[[noreturn]] void Fail(const std::string& metric, const char* what) {
  std::fprintf(stderr, "metric %s: %s\n", metric.c_str(), what);
  std::abort();
}

void CheckSpec(const MetricSpec& spec) {
  if (!IsValidMetricName(spec.name)) Fail(spec.name, "invalid metric name");
  if (spec.type == MetricType::kCounter && !absl::EndsWith(spec.name, "_total")) {
    Fail(spec.name, "a counter's name must end in _total");
  }
  for (const std::string& label : spec.label_names) {
    if (!IsValidLabelName(label)) Fail(spec.name, "invalid label name");
  }
  if (spec.type == MetricType::kHistogram) {
    if (spec.buckets.empty()) Fail(spec.name, "a histogram needs buckets");
    for (size_t i = 1; i < spec.buckets.size(); ++i) {
      if (!(spec.buckets[i - 1] < spec.buckets[i])) {
        Fail(spec.name, "histogram buckets must increase");
      }
    }
  } else if (!spec.buckets.empty()) {
    Fail(spec.name, "only histograms have buckets");
  }
  if (!spec.capped_label.empty()) {
    bool found = false;
    for (const std::string& label : spec.label_names) found = found || label == spec.capped_label;
    if (!found || spec.max_label_values < 1) {
      Fail(spec.name, "capped_label must be one of the labels, with max_label_values >= 1");
    }
  }
}

MetricSpec MakeSpec(std::string name, std::string help, MetricType type,
                    std::vector<std::string> label_names) {
  MetricSpec spec;
  spec.name = std::move(name);
  spec.help = std::move(help);
  spec.type = type;
  spec.label_names = std::move(label_names);
  return spec;
}

}  // namespace

std::vector<double> LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

MetricFamily& MetricsRegistry::Add(MetricSpec spec) {
  CheckSpec(spec);
  absl::MutexLock lock(&mu_);
  auto it = families_.find(spec.name);
  if (it != families_.end()) {
    const MetricSpec& existing = it->second->spec();
    if (existing.type != spec.type || existing.label_names != spec.label_names ||
        existing.buckets != spec.buckets) {
      Fail(spec.name, "declared twice with different types, labels or buckets");
    }
    return *it->second;
  }
  std::string name = spec.name;
  auto family = std::make_unique<MetricFamily>(std::move(spec));
  MetricFamily& result = *family;
  families_.emplace(std::move(name), std::move(family));
  return result;
}

MetricFamily& MetricsRegistry::Counter(std::string name, std::string help,
                                       std::vector<std::string> label_names) {
  return Add(
      MakeSpec(std::move(name), std::move(help), MetricType::kCounter, std::move(label_names)));
}

MetricFamily& MetricsRegistry::Gauge(std::string name, std::string help,
                                     std::vector<std::string> label_names) {
  return Add(
      MakeSpec(std::move(name), std::move(help), MetricType::kGauge, std::move(label_names)));
}

MetricFamily& MetricsRegistry::Histogram(std::string name, std::string help,
                                         std::vector<std::string> label_names,
                                         std::vector<double> buckets) {
  MetricSpec spec =
      MakeSpec(std::move(name), std::move(help), MetricType::kHistogram, std::move(label_names));
  spec.buckets = std::move(buckets);
  return Add(std::move(spec));
}

int64_t MetricsRegistry::AddCollector(std::function<void()> collect) {
  absl::MutexLock lock(&collect_mu_);
  const int64_t id = next_collector_++;
  collectors_.emplace(id, std::move(collect));
  return id;
}

void MetricsRegistry::RemoveCollector(int64_t id) {
  absl::MutexLock lock(&collect_mu_);
  collectors_.erase(id);
}

std::string MetricsRegistry::Render() {
  absl::MutexLock collect_lock(&collect_mu_);
  for (const auto& [id, collect] : collectors_) collect();
  std::string out;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, family] : families_) family->Render(&out);
  return out;
}

MetricsRegistry& ProcessMetrics() {
  static MetricsRegistry* const registry = new MetricsRegistry();
  return *registry;
}

}  // namespace gantry::metrics
