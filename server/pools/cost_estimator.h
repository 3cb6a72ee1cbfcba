// CostEstimator: what a job spec would take (duration, device-hours, cost) on each pool it could
// run in, from the measured throughput of earlier jobs or a calibration table.
#ifndef GANTRY_SERVER_POOLS_COST_ESTIMATOR_H_
#define GANTRY_SERVER_POOLS_COST_ESTIMATOR_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "gantry/v1/training.pb.h"
#include "storage/cost_repository.h"
#include "storage/pool_repository.h"

namespace gantry::server {

// A measured training rate of one rank: preset, device kind, samples/s and where it comes from.
struct CalibrationEntry {
  const char* preset;
  gantry::v1::DeviceKind device;
  double samples_per_second_per_rank;
  const char* source;
};

// The calibration table (tests/bench/gan_training_bench; docs/BENCHMARKS.md "Cost calibration").
const std::vector<CalibrationEntry>& CalibrationTable();

// Data-parallel efficiency assumed with the calibration table for world_size > 1 (dp_scaling_bench:
// 1.90x with 2 ranks, docs/BENCHMARKS.md); history rates are per-rank rates measured in gangs,
// taken as they are.
inline constexpr double kAssumedScalingEfficiency = 0.95;

// Thread-safe (database reads only). The repositories must outlive it.
class CostEstimator {
 public:
  CostEstimator(storage::PoolRepository& pools, storage::CostRepository& costs)
      : pools_(pools), costs_(costs) {}

  // One estimate per eligible pool (spec.pool alone when named; none defined: one for any
  // worker, pool ""), cheapest first (ties: by name). `dataset_events` < 0: the server does not
  // know the dataset's size (file://), and the estimates say so instead of a duration.
  absl::StatusOr<std::vector<gantry::v1::CostEstimate>> Estimate(const gantry::v1::JobSpec& spec,
                                                                 int64_t dataset_events);

  // Events a job trains on per epoch: the dataset minus its validation hold-out or fold.
  static int64_t TrainingEvents(const gantry::v1::JobSpec& spec, int64_t dataset_events);

 private:
  storage::PoolRepository& pools_;
  storage::CostRepository& costs_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_POOLS_COST_ESTIMATOR_H_
