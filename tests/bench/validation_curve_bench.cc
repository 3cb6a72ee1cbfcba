// What validating every checkpoint costs, through the whole service (a real gantry-server,
// PostgreSQL, two gantry-worker daemons and their ranks; built here, run by hand, figures in
// docs/BENCHMARKS.md "Validation at checkpoints"): the same 2-rank job with a checkpoint every 4
// steps, with validation off and on, alternating. Reports the job's wall time, the validation time
// rank 0 logs per checkpoint and the points of the validation curve.
// Run: GANTRY_TEST_DSN=... build/tests/bench/validation_curve_bench (deploy/local/pg.sh start).
#include <gtest/gtest.h>

#include <cstdio>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "tests/e2e/worker_pool_fixture.h"

namespace gantry::testing {
namespace {

class ValidationCurveBench : public WorkerPoolFixture {
 protected:
  void SetUp() override {
    WorkerPoolFixture::SetUp();
    // The fixture's 20 s progress watchdog is for tests; on a loaded machine a first step can take
    // longer, and a NoProgress restart would spoil the comparison.
    StopServer();
    StartServer({"--join-token-file", join_token_file_, "--heartbeat-interval-ms", "300",
                 "--lease-timeout-ms", "3000", "--hang-timeout-seconds", "600"});
  }
};

double Seconds(const google::protobuf::Timestamp& from, const google::protobuf::Timestamp& to) {
  return static_cast<double>(to.seconds() - from.seconds()) + (to.nanos() - from.nanos()) * 1e-9;
}

TEST_F(ValidationCurveBench, ValidationCostPerCheckpoint) {
  StartWorker("w1", 32500);
  StartWorker("w2", 32530);
  WaitForFreeWorkers(2);
  const std::regex timing(R"(validation: \d+ generated vs \d+ held-out showers.*\(([0-9.]+) s\))");
  std::vector<std::string> rows;
  for (bool validate : {false, true, false, true}) {  // alternating: the machine's load drifts
    v1::JobSpec spec = Spec(0);  // 2 ranks, 8 steps an epoch, 2 epochs, checkpoint every 4 steps
    spec.mutable_validation()->set_disabled(!validate);
    v1::Job job = Submit(spec);
    job = WaitForState(job.id(), v1::JOB_STATE_SUCCEEDED, 900);
    ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.DebugString() << Logs();
    std::vector<double> validations;
    int checkpoints = 0;
    for (const v1::JobEvent& e : Events(job.id())) {
      checkpoints += e.has_checkpoint_saved();
      std::smatch match;
      if (e.has_log() && std::regex_search(e.log().text(), match, timing)) {
        validations.push_back(std::stod(match[1].str()));
      }
    }
    double periodic = 0;  // every validation but the last (the final one) is a checkpoint's
    for (size_t i = 0; i + 1 < validations.size(); ++i) periodic += validations[i];
    const int periodic_count = validations.empty() ? 0 : static_cast<int>(validations.size()) - 1;
    // samples/s is over the whole run (validation pauses included); global batch 8.
    const double sps = job.progress().samples_per_second();
    const double step_s = sps > 0 ? 8.0 / sps : 0;
    const double mean_validation = periodic_count > 0 ? periodic / periodic_count : 0;
    rows.push_back(absl::StrFormat(
        "| %s | %d | %d | %d | %.1f | %.3f | %s | %s | %s |", validate ? "on" : "off",
        job.progress().step(), checkpoints, job.validation_curve_size(),
        Seconds(job.started_at(), job.finished_at()), step_s,
        periodic_count > 0 ? absl::StrFormat("%.3f", mean_validation) : "-",
        periodic_count > 0 && step_s > 0 ? absl::StrFormat("%.1f%%", 100 * mean_validation / step_s)
                                         : "-",
        validations.empty() ? "-" : absl::StrFormat("%.3f", validations.back())));
    WaitForFreeWorkers(2);
  }
  std::printf(
      "\n| validation | steps | checkpoints | curve points | RUNNING -> SUCCEEDED s | s per step "
      "(global batch 8) | mean s per checkpoint validation | validation / step | final validation "
      "s |\n|---|---|---|---|---|---|---|---|---|\n");
  for (const std::string& row : rows) std::printf("%s\n", row.c_str());
}

}  // namespace
}  // namespace gantry::testing
