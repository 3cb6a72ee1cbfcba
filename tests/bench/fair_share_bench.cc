// The scheduler's fair share, quotas and reservations on a simulated cluster (pure scheduler, no
// network): three runs of the same workload, with reservations and the cheapest-pool choice,
// without reservations, and with a cost-blind pool choice. Figures in docs/BENCHMARKS.md.
//   fair_share_bench [--workers=1000] [--jobs=10000] [--tenants=20] [--hours=10] [--seed=N]
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "tests/bench/bench_flags.h"
#include "tests/bench/fair_share_sim.h"

namespace {

int IntFlag(int argc, char** argv, const char* name, int def) {
  int value = def;
  const std::string text = gantry::bench::BenchFlag(argc, argv, name, std::to_string(def));
  if (!absl::SimpleAtoi(text, &value) || value <= 0) {
    std::fprintf(stderr, "--%s: \"%s\" is not a positive integer\n", name, text.c_str());
    std::exit(2);
  }
  return value;
}

}  // namespace

int main(int argc, char** argv) {
  gantry::bench::SimConfig base;
  base.workers = IntFlag(argc, argv, "workers", base.workers);
  base.jobs = IntFlag(argc, argv, "jobs", base.jobs);
  base.tenants = IntFlag(argc, argv, "tenants", base.tenants);
  base.arrival_hours = IntFlag(argc, argv, "hours", 10);
  base.seed = static_cast<uint32_t>(IntFlag(argc, argv, "seed", 20261128));
  struct Run {
    const char* name;
    bool reservations;
    bool fair_share;
    bool cost_blind;
  };
  const Run runs[] = {{"fair share, reservations, cheapest pool", true, true, false},
                      {"fair share, no reservations, cheapest pool", false, true, false},
                      {"FIFO (no tenants), reservations, cheapest pool", true, false, false},
                      {"FIFO (no tenants), no reservations, cheapest pool", false, false, false},
                      {"fair share, reservations, cost-blind pool", true, true, true}};
  std::printf("%d workers in 5 pools, %d jobs from %d tenants arriving over %.0f h\n", base.workers,
              base.jobs, base.tenants, base.arrival_hours);
  std::printf(
      "| run | Schedule() mean / p99 / max ms | rounds | utilisation | Jain mean / min | "
      "gangs >= 32: p95 / worst wait h | all jobs p95 wait h | makespan h | cost | violations |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n");
  int failures = 0;
  for (const Run& run : runs) {
    gantry::bench::SimConfig config = base;
    config.reservations = run.reservations;
    config.fair_share = run.fair_share;
    config.cost_blind = run.cost_blind;
    gantry::bench::SimReport r = gantry::bench::RunFairShareSimulation(config);
    std::printf(
        "| %s | %.3f / %.3f / %.3f | %d | %.3f | %.3f / %.3f | %.2f / %.2f (%d gangs) | %.2f | "
        "%.1f | %.0f | %zu |\n",
        run.name, r.schedule_mean_ms, r.schedule_p99_ms, r.schedule_max_ms, r.rounds, r.utilisation,
        r.jain_mean, r.jain_min, r.large_wait_p95_h, r.large_wait_max_h, r.large_gangs,
        r.wait_p95_h, r.makespan_h, r.cost, r.violations.size());
    std::fflush(stdout);
    for (const std::string& v : r.violations) std::fprintf(stderr, "violation: %s\n", v.c_str());
    failures += static_cast<int>(r.violations.size());
  }
  return failures == 0 ? 0 : 1;
}
