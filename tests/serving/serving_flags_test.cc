// The daemon's generation-serving flags (workers/agent/agent_flags.cc): defaults, values, errors.
#include <gtest/gtest.h>

#include "workers/agent/agent_flags.h"

namespace gantry::agent {
namespace {

std::vector<std::string> Base(std::vector<std::string> extra) {
  std::vector<std::string> args = {"--server=127.0.0.1:7070", "--join-token=t"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST(ServingFlagsTest, DefaultsServeOnAnEphemeralPort) {
  auto o = ParseAgentFlags(Base({}));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->serve_port, 0);
  EXPECT_EQ(o->max_batch_size, 128);
  EXPECT_GT(o->max_queue_delay_ms, 0);
  EXPECT_EQ(o->max_queued_requests, 1024);
  EXPECT_EQ(o->model_cache_bytes, int64_t{1} << 30);
  EXPECT_EQ(o->serve_threads, 0);
}

TEST(ServingFlagsTest, ParsesEveryServingFlag) {
  auto o = ParseAgentFlags(
      Base({"--serve-port=-1", "--max-batch-size", "64", "--max-queue-delay-ms=0.5",
            "--max-queued-requests=10", "--model-cache-bytes=512M", "--serve-threads=3"}));
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->serve_port, -1);
  EXPECT_EQ(o->max_batch_size, 64);
  EXPECT_DOUBLE_EQ(o->max_queue_delay_ms, 0.5);
  EXPECT_EQ(o->max_queued_requests, 10);
  EXPECT_EQ(o->model_cache_bytes, int64_t{512} << 20);
  EXPECT_EQ(o->serve_threads, 3);
}

TEST(ServingFlagsTest, BadValuesNameTheFlag) {
  for (const std::string& bad :
       {"--serve-port=-2", "--serve-port=70000", "--max-batch-size=0", "--max-queue-delay-ms=-1",
        "--max-queue-delay-ms=soon", "--max-queued-requests=0", "--model-cache-bytes=0",
        "--serve-threads=-1"}) {
    auto o = ParseAgentFlags(Base({bad}));
    ASSERT_FALSE(o.ok()) << bad;
    EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string flag = bad.substr(0, bad.find('='));
    EXPECT_NE(o.status().message().find(flag), std::string::npos) << o.status();
  }
}

}  // namespace
}  // namespace gantry::agent
