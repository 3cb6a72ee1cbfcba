// MetricFamily: one named metric (counter, gauge or histogram) and its series, one per label set.
#ifndef GANTRY_BASE_METRICS_METRIC_FAMILY_H_
#define GANTRY_BASE_METRICS_METRIC_FAMILY_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"

namespace gantry::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

// The value every label of an overflowing series is replaced with.
inline constexpr char kOtherLabelValue[] = "other";

// How a family is declared. Names follow the Prometheus rules (checked by the registry).
struct MetricSpec {
  std::string name;  // counters end in "_total"
  std::string help;
  MetricType type = MetricType::kGauge;
  std::vector<std::string> label_names;
  std::vector<double> buckets;  // histograms: increasing upper bounds, +Inf implied
  // Bounded cardinality. `capped_label` (one of label_names) keeps its first `max_label_values`
  // distinct values; later values are recorded as "other" (e.g. tenants). Independently, a family
  // never holds more than `max_series` series: a new label set past that is recorded with every
  // label "other".
  std::string capped_label;
  int max_label_values = 0;
  int max_series = 1000;
};

// A spec with the given name, help, type, labels and (histograms) buckets; the bounds keep their
// defaults.
MetricSpec MakeMetricSpec(std::string name, std::string help, MetricType type,
                          std::vector<std::string> label_names = {},
                          std::vector<double> buckets = {});

// Thread-safe. Label values are passed in the order of spec.label_names; a call with the wrong
// number of values is a programming error and aborts with the family's name.
class MetricFamily {
 public:
  explicit MetricFamily(MetricSpec spec);
  MetricFamily(const MetricFamily&) = delete;
  MetricFamily& operator=(const MetricFamily&) = delete;

  const MetricSpec& spec() const { return spec_; }

  // Counters: adds `amount` (negative and NaN amounts are ignored: counters only go up).
  void Increment(absl::Span<const std::string> labels, double amount = 1);
  // Gauges: sets the value / adds a (possibly negative) amount.
  void Set(absl::Span<const std::string> labels, double value);
  void Add(absl::Span<const std::string> labels, double amount);
  // Histograms: counts one observation in its bucket, the sum and the count.
  void Observe(absl::Span<const std::string> labels, double value);
  // Drops one series (a gauge of something that ended); absent ones are ignored.
  void Remove(absl::Span<const std::string> labels);
  // Drops every series (gauges refilled at each scrape by a collector).
  void Clear();

  // The value of a counter or gauge series (0 when absent); for tests and collectors.
  double Value(absl::Span<const std::string> labels) const;
  // The number of observations of a histogram series (0 when absent).
  uint64_t Count(absl::Span<const std::string> labels) const;
  int SeriesCount() const;

  // Appends the HELP and TYPE lines and every series, in label order, in the text format.
  void Render(std::string* out) const;

 private:
  struct Series {
    double value = 0;                     // counter, gauge
    std::vector<uint64_t> bucket_counts;  // histogram: per bucket (not cumulative), +Inf last
    double sum = 0;
    uint64_t count = 0;
  };

  // The series for `labels` after the cardinality bounds, created when new.
  Series& SeriesFor(absl::Span<const std::string> labels) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckArity(absl::Span<const std::string> labels) const;

  const MetricSpec spec_;
  int capped_index_ = -1;  // index of spec_.capped_label in label_names
  mutable absl::Mutex mu_;
  std::map<std::vector<std::string>, Series> series_ ABSL_GUARDED_BY(mu_);
  std::set<std::string> capped_values_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gantry::metrics

#endif  // GANTRY_BASE_METRICS_METRIC_FAMILY_H_
