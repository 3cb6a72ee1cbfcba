#include "server/platform/budget_gate.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "base/log.h"

namespace gantry::server {

absl::Time BudgetGate::MonthStart(absl::Time t) {
  const absl::CivilSecond now = absl::ToCivilSecond(t, absl::UTCTimeZone());
  return absl::FromCivil(absl::CivilMonth(now), absl::UTCTimeZone());
}

std::string BudgetGate::MonthName(absl::Time t) {
  return absl::FormatTime("%Y-%m", t, absl::UTCTimeZone());
}

std::string BudgetGate::WaitMessage(const std::string& tenant, double spent, double budget,
                                    absl::Time now) {
  return absl::StrFormat(
      "waiting: tenant %s spent %.2f of its %.2f USD budget for %s; raise it with `gantry admin "
      "tenants limits set %s --monthly-budget-usd=N` (0 = unlimited) or wait for the next month",
      tenant, spent, budget, MonthName(now), tenant);
}

void BudgetGate::Refresh(absl::Time now) {
  {
    absl::MutexLock lock(&mu_);
    if (now - refreshed_at_ < refresh_every_) return;
    refreshed_at_ = now;  // a failed read is retried after refresh_every, not every tick
  }
  absl::StatusOr<std::map<std::string, double>> budgets = costs_.MonthlyBudgets();
  if (!budgets.ok()) {
    GANTRY_LOG(WARNING) << "cannot read the tenants' budgets: " << budgets.status();
    return;
  }
  std::map<std::string, Over> over;
  if (!budgets->empty()) {
    absl::StatusOr<std::map<std::string, double>> spend = costs_.SpendSince(MonthStart(now));
    if (!spend.ok()) {
      GANTRY_LOG(WARNING) << "cannot read the tenants' spend: " << spend.status();
      return;
    }
    for (const auto& [tenant, budget] : *budgets) {
      auto it = spend->find(tenant);
      const double spent = it == spend->end() ? 0 : it->second;
      if (spent >= budget) over[tenant] = {spent, budget};
    }
  }
  absl::MutexLock lock(&mu_);
  over_ = std::move(over);
  month_of_ = now;
}

std::optional<std::string> BudgetGate::Exhausted(const std::string& tenant) const {
  absl::MutexLock lock(&mu_);
  auto it = over_.find(tenant);
  if (it == over_.end()) return std::nullopt;
  return WaitMessage(tenant, it->second.spent, it->second.budget, month_of_);
}

}  // namespace gantry::server
