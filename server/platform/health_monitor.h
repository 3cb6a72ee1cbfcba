// HealthMonitor: keeps the server's grpc.health.v1 statuses in line with what it can really serve:
// it probes PostgreSQL and asks the generation router for live serving workers, on its own thread.
#ifndef GANTRY_SERVER_PLATFORM_HEALTH_MONITOR_H_
#define GANTRY_SERVER_PLATFORM_HEALTH_MONITOR_H_

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/periodic_task.h"

namespace gantry::server {

// Thread-safe. Every `period` (and once at Start) it runs `probe_database` (a cheap query with a
// short timeout; OK = reachable) and `serving_workers` (how many live workers serve generation),
// turns them into statuses with Decide and hands every status that changed to `set_status`
// (service name, serving). Transitions of the database are logged once each. The callbacks must
// stay valid until Stop returns; `set_status` is never called after Stop.
class HealthMonitor {
 public:
  // The services whose calls need PostgreSQL, and the one that also needs a worker.
  static constexpr const char* kGenerationService = "gantry.v1.GenerationService";
  static constexpr const char* kWorkerService = "gantry.v1.WorkerService";

  // What every service's status should be: "" (the whole server) and every service that needs the
  // database are SERVING iff the database is reachable; GenerationService iff it is and at least
  // one worker serves generation; WorkerService always (the worker protocol rides out outages).
  static std::map<std::string, bool> Decide(bool database_reachable, int serving_workers);

  HealthMonitor(absl::Duration period, std::function<absl::Status()> probe_database,
                std::function<int()> serving_workers,
                std::function<void(const std::string&, bool)> set_status);
  ~HealthMonitor();  // Stop()
  HealthMonitor(const HealthMonitor&) = delete;
  HealthMonitor& operator=(const HealthMonitor&) = delete;

  // Runs one check at once (so statuses are right before the first call is served), then starts
  // the thread. A period <= 0 checks once and starts no thread.
  void Start();
  // Ends the thread (waits for a check under way). Idempotent.
  void Stop();
  // One check now (the thread's body; tests call it directly).
  void CheckNow();

 private:
  const std::function<absl::Status()> probe_database_;
  const std::function<int()> serving_workers_;
  const std::function<void(const std::string&, bool)> set_status_;
  absl::Mutex check_mu_;  // one check at a time
  std::map<std::string, bool> published_ ABSL_GUARDED_BY(check_mu_);
  std::optional<bool> database_reachable_ ABSL_GUARDED_BY(check_mu_);
  bool stopped_ ABSL_GUARDED_BY(check_mu_) = false;
  PeriodicTask task_;  // last: its thread stops before the members it reads go
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_PLATFORM_HEALTH_MONITOR_H_
