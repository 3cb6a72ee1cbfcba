// StreamPump: a few threads that run the steps of callback-API streams (a database read, a token
// check) when they are due, so that a long-lived stream holds no thread while it waits.
#ifndef GANTRY_SERVER_PLATFORM_STREAM_PUMP_H_
#define GANTRY_SERVER_PLATFORM_STREAM_PUMP_H_

#include <cstdint>
#include <functional>
#include <map>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gantry::server {

// Why a pump: a synchronous handler that waits for a job's next event holds one of the
// listener's threads for the job's whole life, so a tenant with many watches takes the threads
// that other calls need. A watch served through the callback API waits as an entry here instead,
// and a step runs on one of `threads` threads only when it is due or woken. The blocking work of
// every stream (PostgreSQL reads) is thereby bounded by the pump's size, not by the streams.
//
// Thread-safe. Steps run at most once each, on the pump's threads, in order of their due time.
// The destructor stops the threads; steps still waiting are dropped without running, so every
// stream must have ended (the gRPC servers shut down) before the pump is destroyed.
class StreamPump {
 public:
  using Id = uint64_t;

  explicit StreamPump(int threads);
  ~StreamPump();
  StreamPump(const StreamPump&) = delete;
  StreamPump& operator=(const StreamPump&) = delete;

  // Runs `step` once on a pump thread at `when`, or earlier when woken. Ids are never reused.
  Id RunAt(absl::Time when, std::function<void()> step);
  // Makes the step due now if it still waits; a step that ran, or runs, is not affected.
  void Wake(Id id);
  // Makes every waiting step due now (at shutdown, so that streams notice it at once).
  void WakeAll();
  // Steps waiting to run (for tests and metrics).
  int waiting() const;

 private:
  void Loop();

  mutable absl::Mutex mu_;
  // Waiting steps by (due time, id); `due_` finds an id's entry.
  std::map<std::pair<absl::Time, Id>, std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<Id, absl::Time> due_ ABSL_GUARDED_BY(mu_);
  Id next_id_ ABSL_GUARDED_BY(mu_) = 1;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_PLATFORM_STREAM_PUMP_H_
