// CostRepository: what each job attempt used (pool, devices, price, placement to end) and the
// device-hours and costs summed from it: per job, per report group, per tenant and month.
#ifndef GANTRY_STORAGE_COST_REPOSITORY_H_
#define GANTRY_STORAGE_COST_REPOSITORY_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gantry/v1/training.pb.h"
#include "storage/database.h"

namespace gantry::storage {

// One placed attempt of a job, as CostRepository::StartAttempt records it.
struct AttemptUsage {
  std::string job_id;
  int attempt = 0;
  std::string owner;
  std::string model_name;  // the name the trained model is registered under
  std::string preset;      // spec.model_preset (throughput history)
  std::string pool;        // "" = no pool
  gantry::v1::DeviceKind device = gantry::v1::DEVICE_KIND_CPU;
  int devices = 1;                   // ranks x devices per rank
  double price_per_device_hour = 0;  // the pool's price when placed
};

// Which usage a cost report sums and how it groups it.
struct CostReportQuery {
  std::string tenant;  // "" = every tenant
  std::string pool;    // "" = every pool
  bool by_tenant = false, by_pool = false, by_model = false, by_day = false;
  absl::Time start;
  absl::Time end;
};

// Measured training throughput of earlier jobs of one preset on one device kind.
struct ThroughputHistory {
  int jobs = 0;  // finished jobs that reported a rate
  double median_samples_per_second_per_rank = 0;
};

// Thread-safe (stateless over a Database, which must outlive it). Usage rows are closed by
// JobRepository in the transaction that ends an attempt (CloseOpenUsage).
class CostRepository {
 public:
  explicit CostRepository(Database& db) : db_(db) {}

  // Records the start of an attempt at the database's now(). Only while the job is still in
  // that attempt and PLACING, RUNNING or RESTARTING (false otherwise: it ended meanwhile); a
  // repeat for the same attempt keeps the first start.
  absl::StatusOr<bool> StartAttempt(const AttemptUsage& usage);

  // Fills device_hours, cost_usd, pool_usage and cost_note of each job (open attempts count up
  // to now), with one query.
  absl::Status FillUsage(const std::vector<gantry::v1::Job*>& jobs);

  // Sums usage overlapping [start, end), split at UTC midnights, by the query's groups.
  absl::StatusOr<gantry::v1::CostReport> Report(const CostReportQuery& query);

  // Cost per tenant of usage since `start` (tenants with none are absent).
  absl::StatusOr<std::map<std::string, double>> SpendSince(absl::Time start);

  // The most recent (at most 50) SUCCEEDED jobs that ran preset `preset` on `device`: the median
  // of their last reported samples/s divided by their world size.
  absl::StatusOr<ThroughputHistory> History(const std::string& preset,
                                            gantry::v1::DeviceKind device);

  // The tenant's monthly budget in USD (nullopt: none set; 0: unlimited). NOT_FOUND for an
  // unknown tenant.
  absl::StatusOr<std::optional<double>> MonthlyBudget(const std::string& tenant);
  // Replaces it (nullopt clears it). INVALID_ARGUMENT for a negative or non-finite value;
  // NOT_FOUND for an unknown tenant.
  absl::Status SetMonthlyBudget(const std::string& tenant, std::optional<double> budget_usd);
  // Every tenant with a budget above 0.
  absl::StatusOr<std::map<std::string, double>> MonthlyBudgets();

 private:
  Database& db_;
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_COST_REPOSITORY_H_
