#include "server/pools/cost_estimator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"
#include "scheduler/pool_choice.h"
#include "server/requests/pool_requests.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

v1::DeviceKind Normalized(v1::DeviceKind d) {
  return d == v1::DEVICE_KIND_UNSPECIFIED ? v1::DEVICE_KIND_CPU : d;
}

const char* DeviceName(v1::DeviceKind d) {
  return Normalized(d) == v1::DEVICE_KIND_GPU ? "GPU" : "CPU";
}

}  // namespace

const std::vector<CalibrationEntry>& CalibrationTable() {
  // Single-rank, one-thread rates on the shared 2-core build machine (docs/BENCHMARKS.md, "Cost
  // calibration"). GPU rates were not measured: no GPU on that machine.
  static const std::vector<CalibrationEntry>* const kTable = new std::vector<CalibrationEntry>{
      {"tiny", v1::DEVICE_KIND_CPU, 1.51,
       "gan_training_bench --preset=tiny --batch=16 --threads=1, 2-core machine at load 10"},
      {"tiny-template", v1::DEVICE_KIND_CPU, 4.7,
       "fidelity study, 1 rank x 1 thread, batch 16, median of its progress reports, 2-core "
       "machine at load 3-4"},
      {"tiny-spots", v1::DEVICE_KIND_CPU, 4.7,
       "as tiny-template: tests/bench/recipe_probe.sh trained both at 11-12 samples/s side by side "
       "(1 thread, batch 16, 2026-12-02)"},
      {"tiny-smeared", v1::DEVICE_KIND_CPU, 4.7,
       "as tiny-spots (the same networks; smeared spots, a frozen template and another rate)"},
      {"3dgan-25", v1::DEVICE_KIND_CPU, 2.417,
       "dp_scaling_bench, 1 rank x 1 thread, batch 32, quiet 2-core machine"},
  };
  return *kTable;
}

int64_t CostEstimator::TrainingEvents(const v1::JobSpec& spec, int64_t dataset_events) {
  if (dataset_events <= 0) return 0;
  double fraction = 1.0;
  if (spec.has_data_split() && spec.data_split().folds() > 1) {
    fraction = 1.0 - 1.0 / spec.data_split().folds();
  } else if (!spec.validation().disabled()) {
    const double holdout =
        spec.validation().holdout_fraction() > 0 ? spec.validation().holdout_fraction() : 0.1;
    fraction = 1.0 - holdout;
  }
  return static_cast<int64_t>(std::floor(static_cast<double>(dataset_events) * fraction));
}

absl::StatusOr<std::vector<v1::CostEstimate>> CostEstimator::Estimate(const v1::JobSpec& spec,
                                                                      int64_t dataset_events) {
  const v1::DeviceKind device = Normalized(spec.resources_per_rank().device());
  const int world_size = std::max(1, spec.world_size());
  const int devices_per_rank =
      device == v1::DEVICE_KIND_GPU ? std::max(1, spec.resources_per_rank().count()) : 1;

  // The pools: the named one, else every eligible one (scheduler::ChoosePool on each alone).
  ASSIGN_OR_RETURN(std::vector<v1::Pool> stored, pools_.List());
  scheduler::PoolRequirements requirements;
  requirements.pool = spec.pool();
  requirements.device = device;
  requirements.selector.insert(spec.worker_selector().begin(), spec.worker_selector().end());
  requirements.allow_preemptible = spec.allow_preemptible();
  requirements.world_size = world_size;
  std::vector<std::pair<std::string, double>> pools;  // name, price
  for (const v1::Pool& pool : stored) {
    const scheduler::PoolConfig config = PoolConfigOf(pool);
    absl::StatusOr<std::string> chosen = scheduler::ChoosePool({config}, requirements);
    if (chosen.ok() && *chosen == pool.name()) {
      pools.emplace_back(pool.name(), pool.spec().price_per_device_hour());
    }
  }
  if (pools.empty()) pools.emplace_back("", 0.0);  // any matching worker, as without pools

  // The rate: history of finished jobs of this preset on this device kind, else the table.
  ASSIGN_OR_RETURN(storage::ThroughputHistory history, costs_.History(spec.model_preset(), device));
  double rate = 0;
  double efficiency = 1;
  std::string basis;
  if (history.jobs > 0 && history.median_samples_per_second_per_rank > 0) {
    rate = history.median_samples_per_second_per_rank;
    basis = absl::StrFormat(
        "history: %d earlier job%s of preset %s on device kind %s, median %.4g samples/s per "
        "rank (measured in their gangs; scaled linearly to world_size %d)",
        history.jobs, history.jobs == 1 ? "" : "s", spec.model_preset(), DeviceName(device), rate,
        world_size);
  } else {
    for (const CalibrationEntry& entry : CalibrationTable()) {
      if (spec.model_preset() == entry.preset && entry.device == device) {
        rate = entry.samples_per_second_per_rank;
        efficiency = world_size > 1 ? kAssumedScalingEfficiency : 1.0;
        basis = absl::StrFormat(
            "calibration table: preset %s on device kind %s, %.4g samples/s per rank (%s); "
            "world_size %d at %.2f data-parallel efficiency",
            entry.preset, DeviceName(device), rate, entry.source, world_size, efficiency);
        break;
      }
    }
    if (rate <= 0) {
      basis = absl::StrFormat(
          "no estimate: no finished job of preset %s on device kind %s and no calibration entry "
          "for them",
          spec.model_preset(), DeviceName(device));
    }
  }
  const int64_t samples =
      static_cast<int64_t>(spec.hyper_parameters().epochs()) * TrainingEvents(spec, dataset_events);
  if (dataset_events < 0) {
    rate = 0;
    basis = absl::StrCat("no estimate: the server does not know how many events ", spec.dataset(),
                         " holds (upload it or use toymc: to get one)");
  }

  std::vector<v1::CostEstimate> estimates;
  for (const auto& [name, price] : pools) {
    v1::CostEstimate& e = estimates.emplace_back();
    e.set_pool(name);
    e.set_device(device);
    e.set_price_per_device_hour(price);
    e.set_samples(samples);
    e.set_samples_per_second_per_rank(rate);
    e.set_scaling_efficiency(efficiency);
    std::string text = basis;
    if (rate > 0) {
      const double seconds = static_cast<double>(samples) / (rate * world_size * efficiency);
      e.set_duration_seconds(seconds);
      e.set_device_hours(seconds / 3600.0 * world_size * devices_per_rank);
      e.set_cost_usd(e.device_hours() * price);
      if (price <= 0) {
        absl::StrAppend(&text, name.empty()
                                   ? "; no pool: no price, cost 0"
                                   : absl::StrCat("; pool ", name, " has no price: cost 0"));
      }
    }
    e.set_basis(text);
  }
  std::stable_sort(estimates.begin(), estimates.end(),
                   [](const v1::CostEstimate& a, const v1::CostEstimate& b) {
                     if (a.cost_usd() != b.cost_usd()) return a.cost_usd() < b.cost_usd();
                     if (a.price_per_device_hour() != b.price_per_device_hour())
                       return a.price_per_device_hour() < b.price_per_device_hour();
                     return a.pool() < b.pool();
                   });
  return estimates;
}

}  // namespace gantry::server
