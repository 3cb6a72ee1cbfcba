// JobNotifier: wakes the WatchJob streams of a job when this process writes a change of it.
#ifndef GANTRY_SERVER_PLATFORM_JOB_NOTIFIER_H_
#define GANTRY_SERVER_PLATFORM_JOB_NOTIFIER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace gantry::server {

// Thread-safe. Writers call Notify(job_id) after a change of the job (state, event, progress)
// is committed; a watcher holds a Subscription, whose callback makes it read again. Only jobs
// with a watcher are tracked, so memory is bounded by the open watches. Changes made by another
// process (a second server, SQL) are not signalled: watchers also re-read after a fallback
// interval.
class JobNotifier {
 public:
  // A watcher's registration for one job; unregisters when destroyed, after which its callback
  // no longer runs. Not thread-safe itself.
  class Subscription {
   public:
    // `on_change` runs on the notifying thread, under the notifier's lock, for every Notify of
    // the job: it must be quick and must not call the notifier.
    Subscription(JobNotifier& notifier, std::string job_id, std::function<void()> on_change);
    ~Subscription();
    Subscription(const Subscription&) = delete;
    Subscription& operator=(const Subscription&) = delete;

   private:
    JobNotifier& notifier_;
    const std::string job_id_;
    uint64_t id_;
  };

  void Notify(const std::string& job_id);
  // Jobs with at least one watcher.
  int watched_jobs() const;

 private:
  mutable absl::Mutex mu_;
  // Per watched job, its watchers' callbacks by subscription id.
  absl::flat_hash_map<std::string, std::map<uint64_t, std::function<void()>>> jobs_
      ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_PLATFORM_JOB_NOTIFIER_H_
