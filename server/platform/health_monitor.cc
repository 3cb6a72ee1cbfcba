#include "server/platform/health_monitor.h"

#include <cstdio>
#include <utility>

#include "base/log.h"

namespace gantry::server {
namespace {

// Every public service but WorkerService answers from PostgreSQL (GenerationService resolves the
// model there).
constexpr const char* kDatabaseServices[] = {"gantry.v1.TrainingService",
                                             "gantry.v1.CatalogService", "gantry.v1.DatasetService",
                                             "gantry.v1.AdminService"};

}  // namespace

std::map<std::string, bool> HealthMonitor::Decide(bool database_reachable, int serving_workers) {
  std::map<std::string, bool> statuses;
  statuses[""] = database_reachable;
  for (const char* name : kDatabaseServices) statuses[name] = database_reachable;
  statuses[kGenerationService] = database_reachable && serving_workers > 0;
  statuses[kWorkerService] = true;
  return statuses;
}

HealthMonitor::HealthMonitor(absl::Duration period, std::function<absl::Status()> probe_database,
                             std::function<int()> serving_workers,
                             std::function<void(const std::string&, bool)> set_status)
    : probe_database_(std::move(probe_database)),
      serving_workers_(std::move(serving_workers)),
      set_status_(std::move(set_status)),
      task_(period, [this] { CheckNow(); }) {}

HealthMonitor::~HealthMonitor() { Stop(); }

void HealthMonitor::Start() {
  CheckNow();
  task_.Start();
}

void HealthMonitor::Stop() {
  task_.Stop();
  absl::MutexLock lock(&check_mu_);
  stopped_ = true;
}

void HealthMonitor::CheckNow() {
  absl::MutexLock lock(&check_mu_);
  if (stopped_) return;
  const absl::Status database = probe_database_();
  const bool reachable = database.ok();
  if (!database_reachable_.has_value() || *database_reachable_ != reachable) {
    if (reachable && database_reachable_.has_value()) {
      GANTRY_LOG(INFO) << "health: PostgreSQL is reachable again: SERVING";
    } else if (!reachable) {
      GANTRY_LOG(WARNING) << "health: PostgreSQL unreachable (" << database.ToString()
                          << "): services that need it are NOT_SERVING";
    }
    database_reachable_ = reachable;
  }
  for (const auto& [service, serving] : Decide(reachable, serving_workers_())) {
    auto it = published_.find(service);
    if (it != published_.end() && it->second == serving) continue;
    published_[service] = serving;
    set_status_(service, serving);
  }
}

}  // namespace gantry::server
