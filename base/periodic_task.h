// PeriodicTask: the one background loop of the server's periodic work (placement, autoscaling,
// studies, model pins, blob collection, health, stream deadlines): a thread that waits out an
// interval, or a wake-up, or the stop, and runs a tick.
#ifndef GANTRY_BASE_PERIODIC_TASK_H_
#define GANTRY_BASE_PERIODIC_TASK_H_

#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gantry {

// Thread-safe. `tick` runs on the task's own thread, one at a time: first one interval after
// Start, then one interval after each tick ends, or at once after Wake. An interval <= 0 never
// starts the thread.
class PeriodicTask {
 public:
  PeriodicTask(absl::Duration interval, std::function<void()> tick);
  ~PeriodicTask();  // Stop()
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;

  // Starts the thread unless it runs (a stopped task starts again).
  void Start();
  // Ends the wait at once and joins the thread (a tick under way finishes first). Idempotent.
  void Stop();
  // Runs the next tick without waiting out the interval (coalesced: several wakes, one tick).
  void Wake();
  bool running() const;

 private:
  void Loop();

  const absl::Duration interval_;
  const std::function<void()> tick_;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // started and joined by Start and Stop, which the owner does not race
};

}  // namespace gantry

#endif  // GANTRY_BASE_PERIODIC_TASK_H_
