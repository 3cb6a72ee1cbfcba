// The daemon's generation-serving flags (workers/agent/agent_flags.cc): defaults, values, errors.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "workers/agent/agent_flags.h"

namespace gantry::agent {
namespace {

AgentFlags Base() {
  AgentFlags f;
  f.server = "127.0.0.1:7070";
  f.join_token = "t";
  return f;
}

TEST(ServingFlagsTest, DefaultsServeOnAnEphemeralPort) {
  auto o = BuildAgentOptions(Base());
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->serve_port, 0);
  EXPECT_EQ(o->max_batch_size, 128);
  EXPECT_GT(o->max_queue_delay_ms, 0);
  EXPECT_EQ(o->max_queued_requests, 1024);
  EXPECT_EQ(o->model_cache_bytes, int64_t{1} << 30);
  EXPECT_EQ(o->serve_threads, 0);
}

TEST(ServingFlagsTest, ParsesEveryServingFlag) {
  AgentFlags f = Base();
  f.serve_port = -1;
  f.max_batch_size = 64;
  f.max_queue_delay_ms = 0.5;
  f.max_queued_requests = 10;
  f.model_cache_bytes = "512M";
  f.serve_threads = 3;
  auto o = BuildAgentOptions(f);
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->serve_port, -1);
  EXPECT_EQ(o->max_batch_size, 64);
  EXPECT_DOUBLE_EQ(o->max_queue_delay_ms, 0.5);
  EXPECT_EQ(o->max_queued_requests, 10);
  EXPECT_EQ(o->model_cache_bytes, int64_t{512} << 20);
  EXPECT_EQ(o->serve_threads, 3);
}

// "--max-queue-delay-ms=soon" (not a number) is refused by gantry::ParseFlags in main:
// tests/agent/CMakeLists.txt runs it against agent_test_daemon.
TEST(ServingFlagsTest, BadValuesNameTheFlag) {
  const std::vector<std::pair<std::string, std::function<void(AgentFlags&)>>> bad = {
      {"--serve-port", [](AgentFlags& f) { f.serve_port = -2; }},
      {"--serve-port", [](AgentFlags& f) { f.serve_port = 70000; }},
      {"--max-batch-size", [](AgentFlags& f) { f.max_batch_size = 0; }},
      {"--max-queue-delay-ms", [](AgentFlags& f) { f.max_queue_delay_ms = -1; }},
      {"--max-queued-requests", [](AgentFlags& f) { f.max_queued_requests = 0; }},
      {"--model-cache-bytes", [](AgentFlags& f) { f.model_cache_bytes = "0"; }},
      {"--serve-threads", [](AgentFlags& f) { f.serve_threads = -1; }},
  };
  for (const auto& [flag, change] : bad) {
    AgentFlags f = Base();
    change(f);
    auto o = BuildAgentOptions(f);
    ASSERT_FALSE(o.ok()) << flag;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(o.status().message().find(flag), std::string::npos) << o.status();
  }
}

}  // namespace
}  // namespace gantry::agent
