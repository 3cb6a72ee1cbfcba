// IsLoopbackTarget: the addresses a secret may reach in clear (the CLI's token, a worker's
// generation endpoint).
#include "base/loopback.h"

#include <gtest/gtest.h>

namespace gantry {
namespace {

TEST(LoopbackTest, TargetsThatStayOnThisHost) {
  for (const char* target :
       {"127.0.0.1:50051", "127.1.2.3:1", "localhost:50051", "LOCALHOST", "localhost.:5",
        "[::1]:50051", "::1", "dns:///localhost:50051", "ipv4:127.0.0.1:5", "ipv6:[::1]:5",
        "unix:/run/gantry.sock", "unix-abstract:gantry", "127.0.0.1"}) {
    EXPECT_TRUE(IsLoopbackTarget(target)) << target;
  }
  for (const char* target :
       {"10.0.0.5:50051", "gantry.example.org:443", "128.0.0.1:1", "127.0.0.256:1",
        "127.0.0.1.evil.example:1", "localhost.evil.example:1", "[2001:db8::1]:5",
        "dns:///gantry:50051", "0.0.0.0:50051", "127.0.0:1", "", "[::1", "127.00000.0.1:1"}) {
    EXPECT_FALSE(IsLoopbackTarget(target)) << target;
  }
}

}  // namespace
}  // namespace gantry
