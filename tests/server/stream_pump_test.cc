// StreamPump and JobNotifier on their own (no server, no database): steps run once, in order of
// their due time, never early unless woken; a waiting step is dropped when the pump goes; a
// notifier calls the watchers of the job notified and none after they unsubscribed.
#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "server/platform/job_notifier.h"
#include "server/platform/stream_pump.h"

namespace gantry::server {
namespace {

// What ran, in order, and when.
class Record {
 public:
  void Add(int step) {
    absl::MutexLock lock(&mu_);
    order_.push_back(step);
    at_.push_back(absl::Now());
  }
  bool WaitFor(size_t n, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return order_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&done), timeout);
  }
  std::vector<int> order() {
    absl::MutexLock lock(&mu_);
    return order_;
  }
  absl::Time at(size_t i) {
    absl::MutexLock lock(&mu_);
    return at_.at(i);
  }

 private:
  absl::Mutex mu_;
  std::vector<int> order_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> at_ ABSL_GUARDED_BY(mu_);
};

TEST(StreamPumpTest, StepsRunOnceInOrderOfTheirDueTimeAndNotBefore) {
  Record record;
  StreamPump pump(1);
  const absl::Time start = absl::Now();
  pump.RunAt(start + absl::Milliseconds(300), [&] { record.Add(3); });
  pump.RunAt(start + absl::Milliseconds(100), [&] { record.Add(1); });
  pump.RunAt(start + absl::Milliseconds(200), [&] { record.Add(2); });
  ASSERT_TRUE(record.WaitFor(3, absl::Seconds(5)));
  EXPECT_EQ(record.order(), (std::vector<int>{1, 2, 3}));
  EXPECT_GE(record.at(0) - start, absl::Milliseconds(100));
  EXPECT_GE(record.at(2) - start, absl::Milliseconds(300));
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(record.order().size(), 3u) << "a step ran twice";
  EXPECT_EQ(pump.waiting(), 0);
}

TEST(StreamPumpTest, AWokenStepRunsAtOnceAndOthersKeepTheirTime) {
  Record record;
  StreamPump pump(2);
  const absl::Time start = absl::Now();
  const StreamPump::Id late = pump.RunAt(start + absl::Hours(1), [&] { record.Add(1); });
  pump.RunAt(start + absl::Hours(1), [&] { record.Add(2); });
  EXPECT_EQ(pump.waiting(), 2);
  pump.Wake(late);
  ASSERT_TRUE(record.WaitFor(1, absl::Seconds(5)));
  EXPECT_LT(record.at(0) - start, absl::Seconds(2));
  EXPECT_EQ(record.order(), std::vector<int>{1});
  EXPECT_EQ(pump.waiting(), 1) << "the other step still waits for its time";
  // Waking a step that ran, or an id never given, changes nothing.
  pump.Wake(late);
  pump.Wake(12345);
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(record.order(), std::vector<int>{1});
}

TEST(StreamPumpTest, WakeAllRunsEveryWaitingStepNow) {
  Record record;
  StreamPump pump(2);
  for (int i = 0; i < 10; ++i) pump.RunAt(absl::Now() + absl::Hours(1), [&, i] { record.Add(i); });
  pump.WakeAll();
  ASSERT_TRUE(record.WaitFor(10, absl::Seconds(5)));
  EXPECT_EQ(pump.waiting(), 0);
}

TEST(StreamPumpTest, AStepMayScheduleTheNextAndManyStreamsShareFewThreads) {
  // 200 chains of 5 steps each (a stream's polls) on 2 threads.
  constexpr int kChains = 200, kSteps = 5;
  StreamPump pump(2);
  std::atomic<int> ran{0};
  absl::Notification all;
  std::function<void(int)> step = [&](int left) {
    if (++ran == kChains * kSteps) all.Notify();
    if (left > 1) pump.RunAt(absl::Now() + absl::Milliseconds(5), [&, left] { step(left - 1); });
  };
  for (int i = 0; i < kChains; ++i) pump.RunAt(absl::Now(), [&] { step(kSteps); });
  ASSERT_TRUE(all.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(ran.load(), kChains * kSteps);
}

TEST(StreamPumpTest, WaitingStepsAreDroppedWhenThePumpGoes) {
  std::atomic<int> ran{0};
  {
    StreamPump pump(1);
    pump.RunAt(absl::Now() + absl::Hours(1), [&] { ++ran; });
  }
  EXPECT_EQ(ran.load(), 0);
}

TEST(JobNotifierTest, NotifyCallsTheWatchersOfThatJobOnly) {
  JobNotifier notifier;
  int a = 0, b = 0, c = 0;
  {
    JobNotifier::Subscription first(notifier, "job-a", [&] { ++a; });
    JobNotifier::Subscription second(notifier, "job-a", [&] { ++b; });
    JobNotifier::Subscription other(notifier, "job-c", [&] { ++c; });
    EXPECT_EQ(notifier.watched_jobs(), 2);
    notifier.Notify("job-a");
    notifier.Notify("job-unwatched");
    EXPECT_EQ(a, 1);
    EXPECT_EQ(b, 1);
    EXPECT_EQ(c, 0);
  }
  // Unsubscribed: no callback runs, and the jobs are no longer tracked.
  EXPECT_EQ(notifier.watched_jobs(), 0);
  notifier.Notify("job-a");
  EXPECT_EQ(a + b + c, 2);
}

}  // namespace
}  // namespace gantry::server
