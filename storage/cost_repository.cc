#include "storage/cost_repository.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "storage/sql_util.h"
#include "storage/transaction.h"

namespace gantry::storage {
namespace {

namespace v1 = ::gantry::v1;

std::string DeviceOf(v1::DeviceKind device) {
  return v1::DeviceKind_Name(device == v1::DEVICE_KIND_UNSPECIFIED ? v1::DEVICE_KIND_CPU : device);
}

int64_t Micros(absl::Time t) { return absl::ToUnixMicros(t); }

// Device-hours of a usage row up to its end, or now for an open attempt.
constexpr const char* kDeviceHours =
    "(EXTRACT(EPOCH FROM (coalesce(ended_at, now()) - started_at)) / 3600.0 * devices)";

}  // namespace

absl::StatusOr<bool> CostRepository::StartAttempt(const AttemptUsage& u) {
  bool started = false;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec(
        "usage_start",
        "INSERT INTO job_usage (job_id, attempt, owner, model_name, preset, pool, device, devices, "
        "price_per_device_hour) "
        "SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9 FROM jobs WHERE id = $1 AND attempt = $2 "
        "AND state IN ('JOB_STATE_PLACING', 'JOB_STATE_RUNNING', 'JOB_STATE_RESTARTING') "
        "ON CONFLICT (job_id, attempt) DO NOTHING RETURNING 1",
        u.job_id, u.attempt, u.owner, u.model_name, u.preset, u.pool, DeviceOf(u.device),
        std::max(u.devices, 1), std::max(u.price_per_device_hour, 0.0));
    started = !r.empty();
    return absl::OkStatus();
  }));
  return started;
}

absl::Status CostRepository::FillUsage(const std::vector<v1::Job*>& jobs) {
  if (jobs.empty()) return absl::OkStatus();
  std::unordered_map<std::string, v1::Job*> by_id;
  std::vector<std::string> ids;
  for (v1::Job* job : jobs) {
    by_id[job->id()] = job;
    ids.push_back(job->id());
  }
  return db_.Transact([&](Transaction& tx) -> absl::Status {
    for (v1::Job* job : jobs) {
      job->clear_pool_usage();
      job->clear_device_hours();
      job->clear_cost_usd();
      job->clear_cost_note();
    }
    pqxx::result r = tx.Exec(
        "usage_of_jobs",
        absl::StrCat("SELECT job_id, pool, device, sum(", kDeviceHours, "), sum(", kDeviceHours,
                     " * price_per_device_hour), max(price_per_device_hour), count(*) "
                     "FROM job_usage WHERE job_id IN (SELECT jsonb_array_elements_text($1::jsonb)) "
                     "GROUP BY job_id, pool, device ORDER BY job_id, pool, device"),
        sql::JsonArray(ids));
    std::unordered_map<std::string, std::vector<std::string>> unpriced;
    for (const pqxx::row& row : r) {
      v1::Job* job = by_id[row[0].as<std::string>()];
      if (job == nullptr) continue;
      v1::PoolUsage* usage = job->add_pool_usage();
      usage->set_pool(row[1].as<std::string>());
      v1::DeviceKind device = v1::DEVICE_KIND_CPU;
      v1::DeviceKind_Parse(row[2].as<std::string>(), &device);
      usage->set_device(device);
      usage->set_device_hours(std::max(0.0, row[3].as<double>()));
      usage->set_cost_usd(std::max(0.0, row[4].as<double>()));
      usage->set_price_per_device_hour(row[5].as<double>());
      usage->set_attempts(row[6].as<int>());
      job->set_device_hours(job->device_hours() + usage->device_hours());
      job->set_cost_usd(job->cost_usd() + usage->cost_usd());
      if (usage->price_per_device_hour() <= 0) {
        unpriced[job->id()].push_back(usage->pool().empty()
                                          ? std::string("no pool: its workers have no price")
                                          : absl::StrCat("pool ", usage->pool(), " has no price"));
      }
    }
    for (auto& [id, notes] : unpriced) {
      by_id[id]->set_cost_note(absl::StrCat(absl::StrJoin(notes, "; "), ": counted at 0 USD"));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<v1::CostReport> CostRepository::Report(const CostReportQuery& q) {
  std::vector<std::string> columns;
  if (q.by_tenant) columns.push_back("owner");
  if (q.by_pool) columns.push_back("pool");
  if (q.by_model) columns.push_back("model_name");
  if (q.by_day) columns.push_back("to_char(day, 'YYYY-MM-DD')");
  const std::string group = absl::StrJoin(columns, ", ");
  const std::string name =
      absl::StrCat("usage_report_", q.by_tenant, q.by_pool, q.by_model, q.by_day);
  // Each attempt is clipped to [start, end) and split at UTC midnights, so a day (and a month)
  // gets exactly the device-hours that fell in it.
  const std::string sql = absl::StrCat(
      "WITH u AS ("
      "  SELECT job_id, owner, pool, model_name, devices, price_per_device_hour AS price, "
      "    greatest(started_at, gantry_ts($1)) AT TIME ZONE 'UTC' AS s, "
      "    least(coalesce(ended_at, now()), gantry_ts($2)) AT TIME ZONE 'UTC' AS e "
      "  FROM job_usage WHERE started_at < gantry_ts($2) "
      "    AND coalesce(ended_at, now()) > gantry_ts($1) "
      "    AND ($3 = '' OR owner = $3) AND ($4 = '' OR pool = $4)), "
      "p AS (SELECT u.*, day, EXTRACT(EPOCH FROM (least(e, day + interval '1 day') - "
      "    greatest(s, day))) / 3600.0 * devices AS dh "
      "  FROM u CROSS JOIN LATERAL generate_series(date_trunc('day', s), e, interval '1 day') "
      "    AS day) "
      "SELECT ",
      group.empty() ? "" : group + ", ",
      "coalesce(sum(dh), 0), coalesce(sum(dh * price), 0), count(DISTINCT job_id) FROM p",
      group.empty() ? "" : absl::StrCat(" GROUP BY ", group, " ORDER BY ", group));
  v1::CostReport report;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    report.Clear();
    pqxx::result r = tx.Exec(name, sql, Micros(q.start), Micros(q.end), q.tenant, q.pool);
    for (const pqxx::row& row : r) {
      const int n = static_cast<int>(columns.size());
      if (n == 0 && row[2].as<int>() == 0) continue;  // nothing in range: no row
      v1::CostReportRow* out = report.add_rows();
      int i = 0;
      if (q.by_tenant) out->set_tenant(row[i++].as<std::string>());
      if (q.by_pool) out->set_pool(row[i++].as<std::string>());
      if (q.by_model) out->set_model_name(row[i++].as<std::string>());
      if (q.by_day) out->set_day(row[i++].as<std::string>());
      out->set_device_hours(std::max(0.0, row[n].as<double>()));
      out->set_cost_usd(std::max(0.0, row[n + 1].as<double>()));
      out->set_jobs(row[n + 2].as<int>());
      report.set_device_hours(report.device_hours() + out->device_hours());
      report.set_cost_usd(report.cost_usd() + out->cost_usd());
    }
    return absl::OkStatus();
  }));
  *report.mutable_start_time() = sql::TimestampFromMicros(Micros(q.start));
  *report.mutable_end_time() = sql::TimestampFromMicros(Micros(q.end));
  return report;
}

absl::StatusOr<std::map<std::string, double>> CostRepository::SpendSince(absl::Time start) {
  CostReportQuery query;
  query.by_tenant = true;
  query.start = start;
  // gantry_ts of a far future: a year after now is enough (open attempts end at now()).
  query.end = absl::Now() + absl::Hours(24 * 366);
  ASSIGN_OR_RETURN(v1::CostReport report, Report(query));
  std::map<std::string, double> spend;
  for (const v1::CostReportRow& row : report.rows()) spend[row.tenant()] = row.cost_usd();
  return spend;
}

absl::StatusOr<ThroughputHistory> CostRepository::History(const std::string& preset,
                                                          v1::DeviceKind device) {
  std::vector<double> rates;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    rates.clear();
    pqxx::result r =
        tx.Exec("usage_history",
                "SELECT j.progress, j.spec FROM jobs j WHERE j.state = 'JOB_STATE_SUCCEEDED' "
                "AND j.progress IS NOT NULL AND j.id IN "
                "  (SELECT job_id FROM job_usage WHERE preset = $1 AND device = $2) "
                "ORDER BY j.seq DESC LIMIT 50",
                preset, DeviceOf(device));
    for (const pqxx::row& row : r) {
      v1::Progress progress;
      v1::JobSpec spec;
      if (!sql::ParseBytes(row[0], &progress).ok() || !sql::ParseBytes(row[1], &spec).ok()) {
        continue;
      }
      if (progress.samples_per_second() <= 0 || spec.world_size() <= 0) continue;
      rates.push_back(progress.samples_per_second() / spec.world_size());
    }
    return absl::OkStatus();
  }));
  ThroughputHistory history;
  history.jobs = static_cast<int>(rates.size());
  if (!rates.empty()) {
    std::sort(rates.begin(), rates.end());
    const size_t n = rates.size();
    history.median_samples_per_second_per_rank =
        n % 2 == 1 ? rates[n / 2] : (rates[n / 2 - 1] + rates[n / 2]) / 2;
  }
  return history;
}

absl::StatusOr<std::optional<double>> CostRepository::MonthlyBudget(const std::string& tenant) {
  std::optional<double> budget;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    budget.reset();
    pqxx::result r = tx.Exec("budget_get",
                             "SELECT l.monthly_budget_usd FROM tenants t LEFT JOIN tenant_limits l "
                             "ON l.tenant = t.name WHERE t.name = $1",
                             tenant);
    if (r.empty()) {
      return absl::NotFoundError(absl::StrCat("tenant \"", tenant, "\" does not exist"));
    }
    if (!r[0][0].is_null()) budget = r[0][0].as<double>();
    return absl::OkStatus();
  }));
  return budget;
}

absl::Status CostRepository::SetMonthlyBudget(const std::string& tenant,
                                              std::optional<double> budget_usd) {
  if (budget_usd && (!std::isfinite(*budget_usd) || *budget_usd < 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("overrides.monthly_budget_usd: ", *budget_usd,
                     " is not a budget; give a finite amount >= 0 in USD (0 = unlimited)"));
  }
  return db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result t = tx.Exec("tenant_exists", "SELECT 1 FROM tenants WHERE name = $1", tenant);
    if (t.empty()) {
      return absl::NotFoundError(absl::StrCat("tenant \"", tenant, "\" does not exist"));
    }
    tx.Exec("budget_set",
            "INSERT INTO tenant_limits (tenant, monthly_budget_usd) VALUES ($1, $2) "
            "ON CONFLICT (tenant) DO UPDATE SET monthly_budget_usd = EXCLUDED.monthly_budget_usd, "
            "updated_at = now()",
            tenant, budget_usd);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::map<std::string, double>> CostRepository::MonthlyBudgets() {
  std::map<std::string, double> budgets;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    budgets.clear();
    for (const pqxx::row& row : tx.Exec("budget_all",
                                        "SELECT tenant, monthly_budget_usd FROM tenant_limits "
                                        "WHERE monthly_budget_usd > 0")) {
      budgets[row[0].as<std::string>()] = row[1].as<double>();
    }
    return absl::OkStatus();
  }));
  return budgets;
}

}  // namespace gantry::storage
