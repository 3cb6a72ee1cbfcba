// BudgetGate: which tenants have spent their monthly budget, from a per-tenant spend cache that
// the placement loop refreshes every few seconds (never a query per job).
#ifndef GANTRY_SERVER_PLATFORM_BUDGET_GATE_H_
#define GANTRY_SERVER_PLATFORM_BUDGET_GATE_H_

#include <map>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "storage/cost_repository.h"

namespace gantry::server {

// Thread-safe. `costs` must outlive it.
class BudgetGate {
 public:
  BudgetGate(storage::CostRepository& costs, absl::Duration refresh_every)
      : costs_(costs), refresh_every_(refresh_every) {}

  // Reads every tenant's budget and this month's spend (two queries) when the cache is older
  // than refresh_every; a failed read keeps the previous view.
  void Refresh(absl::Time now);

  // Why `tenant`'s queued jobs wait ("waiting: tenant a spent 25.10 of its 25.00 USD budget for
  // 2026-11; ..."), or nullopt when it is under its budget or has none.
  std::optional<std::string> Exhausted(const std::string& tenant) const;

  // The calendar month (UTC) of `t`: its first instant and its name "YYYY-MM".
  static absl::Time MonthStart(absl::Time t);
  static std::string MonthName(absl::Time t);
  // The wait message for a tenant at `spent` of `budget` USD in the month of `now`.
  static std::string WaitMessage(const std::string& tenant, double spent, double budget,
                                 absl::Time now);

 private:
  struct Over {
    double spent = 0;
    double budget = 0;
  };
  storage::CostRepository& costs_;
  const absl::Duration refresh_every_;
  mutable absl::Mutex mu_;
  absl::Time refreshed_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time month_of_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::map<std::string, Over> over_ ABSL_GUARDED_BY(mu_);  // tenants at or above their budget
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_PLATFORM_BUDGET_GATE_H_
