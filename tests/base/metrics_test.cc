// The metrics registry and its Prometheus text writer, checked against the format's rules; the
// HTTP endpoint over a real socket.
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "base/http/listen_address.h"
#include "base/metrics/metric_family.h"
#include "base/metrics/metrics_http_server.h"
#include "base/metrics/metrics_registry.h"
#include "base/metrics/prometheus_text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace gantry::metrics {
namespace {

using ::testing::HasSubstr;

TEST(PrometheusTextTest, EscapesLabelValues) {
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
  EXPECT_EQ(EscapeLabelValue("a\\b"), "a\\\\b");
  EXPECT_EQ(EscapeLabelValue("say \"hi\""), "say \\\"hi\\\"");
  EXPECT_EQ(EscapeLabelValue("two\nlines"), "two\\nlines");
  EXPECT_EQ(EscapeLabelValue("caf\xC3\xA9"), "caf\xC3\xA9");            // valid UTF-8 kept
  EXPECT_EQ(EscapeLabelValue("bad\xFF"), "bad\xEF\xBF\xBD");            // invalid byte replaced
  EXPECT_EQ(EscapeLabelValue("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong '/'
}

TEST(PrometheusTextTest, EscapesHelpButNotQuotes) {
  EXPECT_EQ(EscapeHelp("a \"b\"\\c\nd"), "a \"b\"\\\\c\\nd");
}

TEST(PrometheusTextTest, FormatsValues) {
  EXPECT_EQ(FormatSampleValue(0), "0");
  EXPECT_EQ(FormatSampleValue(42), "42");
  EXPECT_EQ(FormatSampleValue(-3), "-3");
  EXPECT_EQ(FormatSampleValue(0.25), "0.25");
  EXPECT_EQ(FormatSampleValue(0.1), "0.1");
  EXPECT_EQ(FormatSampleValue(1e300), "1e+300");
  EXPECT_EQ(FormatSampleValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatSampleValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatSampleValue(std::numeric_limits<double>::quiet_NaN()), "NaN");
}

TEST(PrometheusTextTest, ChecksNames) {
  EXPECT_TRUE(IsValidMetricName("gantry_jobs"));
  EXPECT_TRUE(IsValidMetricName("a:b_c1"));
  EXPECT_FALSE(IsValidMetricName("1abc"));
  EXPECT_FALSE(IsValidMetricName("a-b"));
  EXPECT_FALSE(IsValidMetricName(""));
  EXPECT_TRUE(IsValidLabelName("tenant"));
  EXPECT_FALSE(IsValidLabelName("__name__"));
  EXPECT_FALSE(IsValidLabelName("le"));
  EXPECT_FALSE(IsValidLabelName("a:b"));
}

TEST(MetricsRegistryTest, RendersCounterWithHelpTypeAndEscapedLabels) {
  MetricsRegistry registry;
  MetricFamily& calls =
      registry.Counter("test_calls_total", "Calls \\ made.\nSecond line.", {"method", "code"});
  calls.Increment({"/a.B/C", "OK"});
  calls.Increment({"/a.B/C", "OK"}, 2);
  calls.Increment({"x\"y\\z\n", "NOT_FOUND"});
  calls.Increment({"/a.B/C", "OK"}, -5);  // counters never go down
  EXPECT_EQ(registry.Render(),
            "# HELP test_calls_total Calls \\\\ made.\\nSecond line.\n"
            "# TYPE test_calls_total counter\n"
            "test_calls_total{method=\"/a.B/C\",code=\"OK\"} 3\n"
            "test_calls_total{method=\"x\\\"y\\\\z\\n\",code=\"NOT_FOUND\"} 1\n");
}

TEST(MetricsRegistryTest, RendersGaugeWithoutLabels) {
  MetricsRegistry registry;
  MetricFamily& depth = registry.Gauge("test_depth", "Depth.");
  depth.Set({}, 5);
  depth.Add({}, -1.5);
  EXPECT_EQ(registry.Render(),
            "# HELP test_depth Depth.\n# TYPE test_depth gauge\ntest_depth 3.5\n");
}

TEST(MetricsRegistryTest, RendersHistogramWithCumulativeBucketsSumAndCount) {
  MetricsRegistry registry;
  MetricFamily& latency =
      registry.Histogram("test_latency_seconds", "Latency.", {"method"}, {0.1, 0.5, 1});
  for (const double v : {0.05, 0.1, 0.3, 0.7, 2.0}) latency.Observe({"m"}, v);
  EXPECT_EQ(registry.Render(),
            "# HELP test_latency_seconds Latency.\n"
            "# TYPE test_latency_seconds histogram\n"
            "test_latency_seconds_bucket{method=\"m\",le=\"0.1\"} 2\n"
            "test_latency_seconds_bucket{method=\"m\",le=\"0.5\"} 3\n"
            "test_latency_seconds_bucket{method=\"m\",le=\"1\"} 4\n"
            "test_latency_seconds_bucket{method=\"m\",le=\"+Inf\"} 5\n"
            "test_latency_seconds_sum{method=\"m\"} 3.15\n"
            "test_latency_seconds_count{method=\"m\"} 5\n");
  EXPECT_EQ(latency.Count({"m"}), 5u);
}

TEST(MetricsRegistryTest, HistogramWithoutLabelsHasOnlyLe) {
  MetricsRegistry registry;
  registry.Histogram("test_h", "H.", {}, {1}).Observe({}, 3);
  const std::string page = registry.Render();
  EXPECT_THAT(page, HasSubstr("test_h_bucket{le=\"1\"} 0\n"));
  EXPECT_THAT(page, HasSubstr("test_h_bucket{le=\"+Inf\"} 1\n"));
  EXPECT_THAT(page, HasSubstr("test_h_sum 3\n"));
  EXPECT_THAT(page, HasSubstr("test_h_count 1\n"));
}

TEST(MetricsRegistryTest, CapsATenantLabelWithOther) {
  MetricsRegistry registry;
  MetricSpec spec;
  spec.name = "test_jobs_total";
  spec.help = "Jobs.";
  spec.type = MetricType::kCounter;
  spec.label_names = {"tenant", "state"};
  spec.capped_label = "tenant";
  spec.max_label_values = 2;
  MetricFamily& jobs = registry.Add(spec);
  jobs.Increment({"alice", "QUEUED"});
  jobs.Increment({"bob", "QUEUED"});
  jobs.Increment({"carol", "QUEUED"});
  jobs.Increment({"dave", "RUNNING"});
  jobs.Increment({"alice", "RUNNING"});  // a known tenant keeps its name
  EXPECT_EQ(jobs.Value({"other", "QUEUED"}), 1);
  EXPECT_EQ(jobs.Value({"other", "RUNNING"}), 1);
  EXPECT_EQ(jobs.Value({"alice", "RUNNING"}), 1);
  EXPECT_EQ(jobs.Value({"carol", "QUEUED"}), 0);
  EXPECT_EQ(jobs.SeriesCount(), 5);
}

TEST(MetricsRegistryTest, BoundsTheNumberOfSeries) {
  MetricsRegistry registry;
  MetricSpec spec;
  spec.name = "test_bounded";
  spec.help = "Bounded.";
  spec.label_names = {"id"};
  spec.max_series = 3;
  MetricFamily& family = registry.Add(spec);
  for (int i = 0; i < 100; ++i) family.Add({std::to_string(i)}, 1);
  EXPECT_EQ(family.SeriesCount(), 4);  // three named and "other"
  EXPECT_EQ(family.Value({"other"}), 97);
}

TEST(MetricsRegistryTest, SameDeclarationReturnsTheSameFamily) {
  MetricsRegistry registry;
  MetricFamily& a = registry.Counter("test_same_total", "Same.", {"x"});
  MetricFamily& b = registry.Counter("test_same_total", "Same.", {"x"});
  EXPECT_EQ(&a, &b);
}

TEST(MetricsRegistryDeathTest, RejectsBadDeclarations) {
  MetricsRegistry registry;
  EXPECT_DEATH(registry.Counter("test_no_suffix", "C."), "must end in _total");
  EXPECT_DEATH(registry.Gauge("bad-name", "G."), "invalid metric name");
  EXPECT_DEATH(registry.Gauge("test_g", "G.", {"le"}), "invalid label name");
  EXPECT_DEATH(registry.Histogram("test_h", "H.", {}, {1, 1}), "buckets must increase");
  registry.Gauge("test_clash", "G.", {"a"});
  EXPECT_DEATH(registry.Gauge("test_clash", "G.", {"b"}), "declared twice");
  MetricFamily& family = registry.Gauge("test_arity", "G.", {"a", "b"});
  EXPECT_DEATH(family.Set({"only-one"}, 1), "takes 2 label values, got 1");
}

TEST(MetricsRegistryTest, CollectorsRunBeforeEachRenderingUntilRemoved) {
  MetricsRegistry registry;
  MetricFamily& gauge = registry.Gauge("test_collected", "Collected.");
  int runs = 0;
  const int64_t id = registry.AddCollector([&] { gauge.Set({}, ++runs); });
  EXPECT_THAT(registry.Render(), HasSubstr("test_collected 1\n"));
  EXPECT_THAT(registry.Render(), HasSubstr("test_collected 2\n"));
  registry.RemoveCollector(id);
  EXPECT_THAT(registry.Render(), HasSubstr("test_collected 2\n"));
}

TEST(MetricsRegistryTest, ConcurrentUpdatesAreAllCounted) {
  MetricsRegistry registry;
  MetricFamily& counter = registry.Counter("test_concurrent_total", "C.", {"t"});
  MetricFamily& histogram = registry.Histogram("test_concurrent_h", "H.", {}, {0.5});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10000; ++i) {
        counter.Increment({std::to_string(t % 2)});
        histogram.Observe({}, i % 2);
        if (i % 1000 == 0) registry.Render();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(counter.Value({"0"}) + counter.Value({"1"}), 40000);
  EXPECT_EQ(histogram.Count({}), 40000u);
}

TEST(ParseListenAddressTest, AcceptsHostPortAndBracketedIpv6) {
  absl::StatusOr<HostPort> v4 = ParseListenAddress("127.0.0.1:9100", "--metrics-listen");
  ASSERT_TRUE(v4.ok());
  EXPECT_EQ(v4->host, "127.0.0.1");
  EXPECT_EQ(v4->port, 9100);
  absl::StatusOr<HostPort> v6 = ParseListenAddress("[::1]:0", "--metrics-listen");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 0);
}

TEST(ParseListenAddressTest, RejectsMalformedAddressesNamingTheFlag) {
  for (const char* bad : {"9100", "host:", ":9100", "host:70000", "host:-1", "::1:9100", "[::1]",
                          "[::1]9100", "host:12ab"}) {
    absl::StatusOr<HostPort> parsed = ParseListenAddress(bad, "--metrics-listen");
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("--metrics-listen"));
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr("HOST:PORT"));
  }
}

TEST(MetricsHttpServerTest, ServesTheRegistryOverHttp) {
  MetricsRegistry registry;
  registry.Counter("test_served_total", "Served.").Increment({});
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> server =
      MetricsHttpServer::Start("127.0.0.1:41100", "--metrics-listen", &registry);
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->address(), "127.0.0.1:41100");
  httplib::Client client("127.0.0.1", 41100);
  httplib::Result result = client.Get("/metrics");
  ASSERT_TRUE(result) << httplib::to_string(result.error());
  EXPECT_EQ(result->status, 200);
  EXPECT_EQ(result->get_header_value("Content-Type"), kPrometheusTextContentType);
  EXPECT_THAT(result->body, HasSubstr("test_served_total 1\n"));
  httplib::Result missing = client.Get("/other");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);

  // The port is taken while the server runs: a second one fails with a clear message.
  absl::StatusOr<std::unique_ptr<MetricsHttpServer>> second =
      MetricsHttpServer::Start("127.0.0.1:41100", "--metrics-listen", &registry);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(second.status().message()), HasSubstr("--metrics-listen"));
}

TEST(MetricsHttpServerTest, StopsPromptlyRightAfterStarting) {
  MetricsRegistry registry;
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<std::unique_ptr<MetricsHttpServer>> server =
        MetricsHttpServer::Start("127.0.0.1:41101", "--metrics-listen", &registry);
    ASSERT_TRUE(server.ok()) << server.status();
  }
}

}  // namespace
}  // namespace gantry::metrics
