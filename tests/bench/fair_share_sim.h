// RunFairShareSimulation: the pure Scheduler on a simulated clock with thousands of workers in
// five pools and jobs of many tenants (Poisson arrivals, mixed gang sizes and run times): what
// fair share, quotas and reservations do to waits, utilisation, fairness and cost. No network.
#ifndef GANTRY_TESTS_BENCH_FAIR_SHARE_SIM_H_
#define GANTRY_TESTS_BENCH_FAIR_SHARE_SIM_H_

#include <cstdint>
#include <string>
#include <vector>

namespace gantry::bench {

struct SimConfig {
  int workers = 1000;  // split over the five pools in fixed proportions
  int jobs = 10000;
  int tenants = 20;           // weights 1, 2, 3, 4 in turn; the first five have pool quotas
  double arrival_hours = 10;  // Poisson arrivals spread over this long (offered load ~0.8)
  bool reservations = true;   // SchedulerOptions.reservations
  bool fair_share = true;     // false: the scheduler sees no tenants (FIFO within a priority)
  bool cost_blind = false;    // pool choice: first eligible in list order, not cheapest
  uint32_t seed = 20261128;
  bool check_invariants = true;  // over-booking, quotas and whole gangs after every round
};

struct SimReport {
  int rounds = 0;               // Schedule() calls
  double schedule_mean_ms = 0;  // wall time of one Schedule()
  double schedule_p99_ms = 0;
  double schedule_max_ms = 0;
  double utilisation = 0;       // busy slot-time / capacity while jobs arrive
  double jain_mean = 0;         // Jain index of slots held / weight over backlogged tenants
  double jain_min = 0;          // its lowest sample
  int large_gangs = 0;          // jobs with world_size >= 32
  double large_wait_p95_h = 0;  // their wait (start - submission)
  double large_wait_max_h = 0;
  double wait_p95_h = 0;                // every job's wait
  double makespan_h = 0;                // until the last job ends
  double cost = 0;                      // sum of ranks x run time x pool price
  int finished = 0;                     // jobs that ran to the end
  std::vector<std::string> violations;  // invariant breaches (empty when all held)
};

SimReport RunFairShareSimulation(const SimConfig& config);

}  // namespace gantry::bench

#endif  // GANTRY_TESTS_BENCH_FAIR_SHARE_SIM_H_
