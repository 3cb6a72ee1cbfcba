// What the server adds per Generate call, with and without its token and model-reference caches
// (--auth-cache-ttl-ms, --model-cache-ttl-ms): a real gantry-server and PostgreSQL, and a
// FakeGenerationWorker that answers at once, so the figures are the server's own overhead
// (authentication, resolution, validation, routing, one proxied stream). Run by hand (not in
// ctest): GANTRY_TEST_DSN=... build/tests/server/generation_overhead_bench
// Prints, per setting: sequential 1-shower calls (p50, p99) and 64 concurrent 1-shower clients
// (calls/s).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <iostream>
#include <thread>
#include <vector>

#include "tests/server/generation_fixture.h"

namespace gantry::testing {
namespace {

using std::chrono::steady_clock;

class GenerationOverheadBench : public GenerationFixture {};

TEST_F(GenerationOverheadBench, PerCallOverheadWithAndWithoutCaches) {
  struct Setting {
    const char* name;
    std::vector<std::string> flags;
  };
  const std::vector<Setting> settings = {
      {"caches on (2 s TTL, the default)", {}},
      {"caches off", {"--auth-cache-ttl-ms", "0", "--model-cache-ttl-ms", "0"}},
  };
  for (const Setting& setting : settings) {
    RestartServer(setting.flags);
    GenWorker worker = AddWorker("alpha", {sha_});
    LetHeartbeatsLand();
    std::vector<double> ms;
    for (int i = 0; i < 500; ++i) {
      const auto t0 = steady_clock::now();
      Generated g = Generate(token_, ListRequest("calo@prod", {50}));
      ASSERT_TRUE(g.status.ok()) << Describe(g.status);
      ASSERT_EQ(g.showers(), 1);
      ms.push_back(std::chrono::duration<double, std::milli>(steady_clock::now() - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    std::atomic<int64_t> calls{0}, failures{0};
    const auto until = steady_clock::now() + std::chrono::seconds(5);
    std::vector<std::thread> clients;
    for (int c = 0; c < 64; ++c) {
      clients.emplace_back([&] {
        while (steady_clock::now() < until) {
          if (Generate(token_, ListRequest("calo@prod", {50})).status.ok()) {
            ++calls;
          } else {
            ++failures;
          }
        }
      });
    }
    for (std::thread& t : clients) t.join();
    EXPECT_EQ(failures, 0);
    std::cout << setting.name << ": sequential 1-shower call p50 " << ms[ms.size() / 2]
              << " ms, p99 " << ms[ms.size() * 99 / 100] << " ms; 64 concurrent clients "
              << calls / 5.0 << " calls/s" << std::endl;
  }
}

}  // namespace
}  // namespace gantry::testing
