#include "base/metrics/metric_family.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/metrics/prometheus_text.h"

namespace gantry::metrics {
namespace {

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

std::vector<std::pair<std::string, std::string>> Pairs(const std::vector<std::string>& names,
                                                       const std::vector<std::string>& values) {
  std::vector<std::pair<std::string, std::string>> pairs;
  pairs.reserve(names.size() + 1);
  for (size_t i = 0; i < names.size(); ++i) pairs.emplace_back(names[i], values[i]);
  return pairs;
}

}  // namespace

MetricSpec MakeMetricSpec(std::string name, std::string help, MetricType type,
                          std::vector<std::string> label_names, std::vector<double> buckets) {
  MetricSpec spec;
  spec.name = std::move(name);
  spec.help = std::move(help);
  spec.type = type;
  spec.label_names = std::move(label_names);
  spec.buckets = std::move(buckets);
  return spec;
}

MetricFamily::MetricFamily(MetricSpec spec) : spec_(std::move(spec)) {
  for (size_t i = 0; i < spec_.label_names.size(); ++i) {
    if (spec_.label_names[i] == spec_.capped_label) capped_index_ = static_cast<int>(i);
  }
}

void MetricFamily::CheckArity(absl::Span<const std::string> labels) const {
  if (labels.size() == spec_.label_names.size()) return;
  std::fprintf(stderr, "metric %s takes %zu label values, got %zu\n", spec_.name.c_str(),
               spec_.label_names.size(), labels.size());
  std::abort();
}

MetricFamily::Series& MetricFamily::SeriesFor(absl::Span<const std::string> labels) {
  CheckArity(labels);
  std::vector<std::string> key(labels.begin(), labels.end());
  if (capped_index_ >= 0) {
    std::string& value = key[capped_index_];
    if (capped_values_.count(value) == 0) {
      if (static_cast<int>(capped_values_.size()) < spec_.max_label_values) {
        capped_values_.insert(value);
      } else {
        value = kOtherLabelValue;
      }
    }
  }
  auto it = series_.find(key);
  if (it == series_.end()) {
    if (spec_.max_series > 0 && static_cast<int>(series_.size()) >= spec_.max_series) {
      key.assign(key.size(), kOtherLabelValue);
    }
    it = series_.try_emplace(std::move(key)).first;
    if (spec_.type == MetricType::kHistogram && it->second.bucket_counts.empty()) {
      it->second.bucket_counts.assign(spec_.buckets.size() + 1, 0);
    }
  }
  return it->second;
}

void MetricFamily::Increment(absl::Span<const std::string> labels, double amount) {
  if (!(amount >= 0)) return;
  absl::MutexLock lock(&mu_);
  SeriesFor(labels).value += amount;
}

void MetricFamily::Set(absl::Span<const std::string> labels, double value) {
  absl::MutexLock lock(&mu_);
  SeriesFor(labels).value = value;
}

void MetricFamily::Add(absl::Span<const std::string> labels, double amount) {
  absl::MutexLock lock(&mu_);
  SeriesFor(labels).value += amount;
}

void MetricFamily::Observe(absl::Span<const std::string> labels, double value) {
  if (std::isnan(value)) return;
  absl::MutexLock lock(&mu_);
  Series& series = SeriesFor(labels);
  size_t bucket = 0;
  while (bucket < spec_.buckets.size() && value > spec_.buckets[bucket]) ++bucket;
  ++series.bucket_counts[bucket];
  series.sum += value;
  ++series.count;
}

void MetricFamily::Remove(absl::Span<const std::string> labels) {
  CheckArity(labels);
  absl::MutexLock lock(&mu_);
  series_.erase(std::vector<std::string>(labels.begin(), labels.end()));
}

void MetricFamily::Clear() {
  absl::MutexLock lock(&mu_);
  series_.clear();
  capped_values_.clear();
}

double MetricFamily::Value(absl::Span<const std::string> labels) const {
  CheckArity(labels);
  absl::MutexLock lock(&mu_);
  const auto it = series_.find(std::vector<std::string>(labels.begin(), labels.end()));
  return it == series_.end() ? 0 : it->second.value;
}

uint64_t MetricFamily::Count(absl::Span<const std::string> labels) const {
  CheckArity(labels);
  absl::MutexLock lock(&mu_);
  const auto it = series_.find(std::vector<std::string>(labels.begin(), labels.end()));
  return it == series_.end() ? 0 : it->second.count;
}

int MetricFamily::SeriesCount() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(series_.size());
}

void MetricFamily::Render(std::string* out) const {
  absl::StrAppend(out, "# HELP ", spec_.name, " ", EscapeHelp(spec_.help), "\n");
  absl::StrAppend(out, "# TYPE ", spec_.name, " ", TypeName(spec_.type), "\n");
  absl::MutexLock lock(&mu_);
  for (const auto& [values, series] : series_) {
    std::vector<std::pair<std::string, std::string>> labels = Pairs(spec_.label_names, values);
    if (spec_.type != MetricType::kHistogram) {
      absl::StrAppend(out, spec_.name, FormatLabels(labels), " ", FormatSampleValue(series.value),
                      "\n");
      continue;
    }
    // Buckets are cumulative: each counts the observations <= its bound; +Inf counts them all.
    uint64_t cumulative = 0;
    labels.emplace_back("le", "");
    for (size_t i = 0; i <= spec_.buckets.size(); ++i) {
      cumulative += series.bucket_counts[i];
      labels.back().second =
          i < spec_.buckets.size() ? FormatSampleValue(spec_.buckets[i]) : std::string("+Inf");
      absl::StrAppend(out, spec_.name, "_bucket", FormatLabels(labels), " ", cumulative, "\n");
    }
    labels.pop_back();
    const std::string label_text = FormatLabels(labels);
    absl::StrAppend(out, spec_.name, "_sum", label_text, " ", FormatSampleValue(series.sum), "\n");
    absl::StrAppend(out, spec_.name, "_count", label_text, " ", series.count, "\n");
  }
}

}  // namespace gantry::metrics
