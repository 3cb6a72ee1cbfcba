// The short fair-share simulation in ctest: 200 workers in five pools, 2,000 jobs from 20 tenants
// (the full benchmark's load per worker). Asserts invariants after every scheduling round (no
// over-booking, quotas never exceeded, gangs whole and in their pool, every job runs), floors on
// Jain's fairness index and utilisation, and that reservations bound the waits of large gangs.
// The simulation is deterministic for a seed; figures in docs/BENCHMARKS.md.
#include "tests/bench/fair_share_sim.h"

#include <gtest/gtest.h>

namespace gantry::bench {
namespace {

// Measured on this workload: Jain 0.71 (fair share) against 0.64 (FIFO), utilisation 0.66, worst
// wait of a gang of 32 or 64 ranks 3.4 h with reservations against 6.4 h without.
constexpr double kJainFloor = 0.6;
constexpr double kUtilisationFloor = 0.5;
constexpr double kLargeWaitCeilingHours = 5;

SimConfig Short(bool reservations, bool fair_share = true) {
  SimConfig config;
  config.workers = 200;
  config.jobs = 2000;
  config.reservations = reservations;
  config.fair_share = fair_share;
  return config;
}

TEST(FairShareSimulationTest, InvariantsHoldSharesAreFairAndLargeGangWaitsAreBounded) {
  const SimReport r = RunFairShareSimulation(Short(true));
  for (const std::string& v : r.violations) ADD_FAILURE() << v;
  EXPECT_EQ(r.finished, 2000);
  EXPECT_GE(r.jain_mean, kJainFloor) << "Jain index of slots held / weight, backlogged tenants";
  EXPECT_GT(r.utilisation, kUtilisationFloor);
  EXPECT_GT(r.large_gangs, 100);
  EXPECT_LE(r.large_wait_max_h, kLargeWaitCeilingHours);

  const SimReport fifo = RunFairShareSimulation(Short(true, /*fair_share=*/false));
  EXPECT_GT(r.jain_mean, fifo.jain_mean) << "fair share must be fairer than FIFO";
}

TEST(FairShareSimulationTest, ReservationsShortenTheWorstWaitOfLargeGangs) {
  const SimReport with = RunFairShareSimulation(Short(true));
  const SimReport without = RunFairShareSimulation(Short(false));
  for (const std::string& v : without.violations) ADD_FAILURE() << v;
  EXPECT_EQ(without.finished, 2000);
  EXPECT_LT(with.large_wait_max_h, without.large_wait_max_h);
}

}  // namespace
}  // namespace gantry::bench
