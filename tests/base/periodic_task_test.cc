// PeriodicTask: ticks at its interval on a thread of its own, at once after Wake, never after Stop,
// and not at all with an interval <= 0.
#include "base/periodic_task.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace gantry {
namespace {

// Polls `done` for up to `limit`; true once it holds.
template <typename Done>
bool Within(absl::Duration limit, Done done) {
  const absl::Time until = absl::Now() + limit;
  while (absl::Now() < until) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return done();
}

TEST(PeriodicTaskTest, TicksAtItsIntervalUntilStopped) {
  std::atomic<int> ticks{0};
  PeriodicTask task(absl::Milliseconds(20), [&] { ++ticks; });
  EXPECT_FALSE(task.running());
  task.Start();
  EXPECT_TRUE(task.running());
  EXPECT_TRUE(Within(absl::Seconds(10), [&] { return ticks.load() >= 3; })) << ticks.load();
  task.Stop();
  EXPECT_FALSE(task.running());
  const int at_stop = ticks.load();
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(ticks.load(), at_stop) << "no tick after Stop";
  task.Stop();  // idempotent
  // Started again after a stop.
  task.Start();
  EXPECT_TRUE(Within(absl::Seconds(10), [&] { return ticks.load() > at_stop; }));
}

TEST(PeriodicTaskTest, WakeRunsTheNextTickWithoutWaitingOutTheInterval) {
  std::atomic<int> ticks{0};
  PeriodicTask task(absl::Hours(1), [&] { ++ticks; });
  task.Start();
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(ticks.load(), 0) << "the first tick waits one interval";
  task.Wake();
  EXPECT_TRUE(Within(absl::Seconds(10), [&] { return ticks.load() == 1; }));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(ticks.load(), 1) << "one wake, one tick";
  task.Wake();
  EXPECT_TRUE(Within(absl::Seconds(10), [&] { return ticks.load() == 2; }));
}

TEST(PeriodicTaskTest, StopWaitsForATickUnderWayAndEndsAnHourLongWait) {
  std::atomic<bool> in_tick{false}, finished{false};
  PeriodicTask slow(absl::Milliseconds(1), [&] {
    in_tick = true;
    absl::SleepFor(absl::Milliseconds(200));
    finished = true;
  });
  slow.Start();
  ASSERT_TRUE(Within(absl::Seconds(10), [&] { return in_tick.load(); }));
  slow.Stop();
  EXPECT_TRUE(finished.load()) << "Stop returned before the tick under way ended";

  PeriodicTask idle(absl::Hours(1), [] {});
  idle.Start();
  const absl::Time before = absl::Now();
  idle.Stop();
  EXPECT_LT(absl::Now() - before, absl::Seconds(5)) << "Stop ends the wait at once";
}

TEST(PeriodicTaskTest, ANonPositiveIntervalNeverStartsTheThread) {
  std::atomic<int> ticks{0};
  PeriodicTask off(absl::ZeroDuration(), [&] { ++ticks; });
  off.Start();
  off.Wake();
  EXPECT_FALSE(off.running());
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(ticks.load(), 0);
}

}  // namespace
}  // namespace gantry
