#include "scheduler/pool_choice.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gantry::scheduler {
namespace {

gantry::v1::DeviceKind Normalized(gantry::v1::DeviceKind device) {
  return device == gantry::v1::DEVICE_KIND_UNSPECIFIED ? gantry::v1::DEVICE_KIND_CPU : device;
}

const char* DeviceName(gantry::v1::DeviceKind device) {
  return Normalized(device) == gantry::v1::DEVICE_KIND_GPU ? "GPU" : "CPU";
}

bool SelectorFits(const PoolConfig& pool, const std::map<std::string, std::string>& selector) {
  for (const auto& [key, value] : selector) {
    if (key == "pool") {
      if (value != pool.name) return false;
      continue;
    }
    auto it = pool.labels.find(key);
    if (it == pool.labels.end() || it->second != value) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<std::string> ChoosePool(const std::vector<PoolConfig>& pools,
                                       const PoolRequirements& job) {
  if (pools.empty()) return std::string();
  std::string named = job.pool;
  if (auto it = job.selector.find("pool"); it != job.selector.end()) {
    if (!named.empty() && named != it->second) {
      return absl::InvalidArgumentError(absl::StrCat("spec.pool \"", named,
                                                     "\" and worker_selector pool=", it->second,
                                                     " disagree; name the pool once"));
    }
    named = it->second;
  }
  if (!named.empty()) {
    auto found = std::find_if(pools.begin(), pools.end(),
                              [&](const PoolConfig& p) { return p.name == named; });
    if (found == pools.end()) {
      std::vector<std::string> names;
      for (const PoolConfig& p : pools) names.push_back(p.name);
      return absl::InvalidArgumentError(
          absl::StrCat("spec.pool: no pool is named \"", named,
                       "\"; defined pools: ", absl::StrJoin(names, ", ")));
    }
    if (Normalized(found->device) != Normalized(job.device)) {
      // A pool declares its workers' device: the job would wait there forever.
      return absl::FailedPreconditionError(
          absl::StrCat("spec.pool: pool ", named, " has ", DeviceName(found->device),
                       " workers only and can never run the job's ", DeviceName(job.device),
                       " ranks; name a ", DeviceName(job.device),
                       " pool, leave the pool out, or change spec.resources_per_rank.device"));
    }
    if (found->elastic && found->max_workers * found->slots_per_worker < job.world_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "spec.world_size: pool ", named, " holds at most ", found->max_workers, " x ",
          found->slots_per_worker, " slots, fewer than world_size ", job.world_size));
    }
    return named;
  }
  const PoolConfig* best = nullptr;
  for (const PoolConfig& pool : pools) {
    if (Normalized(pool.device) != Normalized(job.device)) continue;
    if (pool.preemptible && !job.allow_preemptible) continue;
    if (!SelectorFits(pool, job.selector)) continue;
    if (pool.elastic && pool.max_workers * pool.slots_per_worker < job.world_size) continue;
    if (best == nullptr || pool.price_per_device_hour < best->price_per_device_hour ||
        (pool.price_per_device_hour == best->price_per_device_hour && pool.name < best->name)) {
      best = &pool;
    }
  }
  return best == nullptr ? std::string() : best->name;
}

}  // namespace gantry::scheduler
