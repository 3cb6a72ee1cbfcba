// JobNotifier: wakes the WatchJob streams of a job when this process writes a change of it.
#ifndef GANTRY_SERVER_PLATFORM_JOB_NOTIFIER_H_
#define GANTRY_SERVER_PLATFORM_JOB_NOTIFIER_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gantry::server {

// Thread-safe. Writers call Notify(job_id) after a change of the job (state, event, progress)
// is committed; a watcher holds a Subscription and waits on it between reads. Only jobs with a
// watcher are tracked, so memory is bounded by the open watches. Changes made by another process
// (a second server, SQL) are not signalled: watchers also re-read after a fallback interval.
class JobNotifier {
 public:
  // A watcher's registration for one job; unregisters when destroyed. Not thread-safe itself.
  class Subscription {
   public:
    Subscription(JobNotifier& notifier, std::string job_id);
    ~Subscription();
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;

    // Waits until a Notify for the job arrives after the previous Wait returned (or after the
    // subscription was made), or until `timeout`. True when notified.
    bool Wait(absl::Duration timeout);

   private:
    JobNotifier& notifier_;
    const std::string job_id_;
    uint64_t seen_;
  };

  void Notify(const std::string& job_id);
  // Wakes every watcher (e.g. at shutdown).
  void NotifyAll();

 private:
  struct Entry {
    int watchers = 0;
    uint64_t version = 0;
  };
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> jobs_ ABSL_GUARDED_BY(mu_);
  uint64_t all_version_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_PLATFORM_JOB_NOTIFIER_H_
