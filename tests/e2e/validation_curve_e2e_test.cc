// The validation curve end to end: a real gantry-server, a real gantry-worker daemon and its rank
// train the tiny preset on toy Monte Carlo with a checkpoint every 4 steps; rank 0 validates every
// checkpoint, the points reach GetJob, WatchJob and the registered model.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "tests/e2e/worker_pool_fixture.h"

namespace gantry::testing {
namespace {

using ValidationCurveE2eTest = WorkerPoolFixture;

TEST_F(ValidationCurveE2eTest, EveryCheckpointIsValidatedAndTheCurveReachesJobAndModel) {
  StartWorker("w0", 30600);
  WaitForFreeWorkers(1);
  // 40 events, about 20% held out: about 32 training events, batch 4 -> about 8 steps in one
  // epoch; a checkpoint every 2 steps and the final one.
  v1::JobSpec spec = Spec(/*max_restarts=*/0);
  spec.set_dataset("toymc:layout=25,events=40,seed=5,emin=20,emax=200");
  spec.set_world_size(1);
  spec.mutable_hyper_parameters()->set_epochs(1);
  spec.mutable_checkpoint_policy()->set_every_steps(2);
  spec.set_model_name("curve");
  const v1::Job submitted = Submit(spec);
  const v1::Job done = WaitForState(submitted.id(), v1::JOB_STATE_SUCCEEDED, 100);
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.DebugString() << Logs();

  const v1::Job job = Get(submitted.id());
  ASSERT_GE(job.validation_curve_size(), 2) << job.DebugString() << Logs();
  std::vector<int64_t> steps;
  for (const v1::ValidationPoint& point : job.validation_curve()) {
    if (!steps.empty()) EXPECT_GT(point.step(), steps.back());
    steps.push_back(point.step());
    EXPECT_EQ(point.attempt(), 0);
    EXPECT_EQ(point.histograms_size(), 0);
    for (const char* name : {"fom", "mre_sampling_fraction", "eprof", "pos"}) {
      ASSERT_TRUE(point.metrics().contains(name)) << name << " at step " << point.step();
      EXPECT_TRUE(std::isfinite(point.metrics().at(name))) << name << " at step " << point.step();
    }
  }
  // Every periodic checkpoint (every 2 steps) and the final one (the last step).
  ASSERT_GE(job.progress().step(), 4);
  std::vector<int64_t> expected;
  for (int64_t step = 2; step < job.progress().step(); step += 2) expected.push_back(step);
  expected.push_back(job.progress().step());
  EXPECT_EQ(steps, expected) << Logs();
  // The last point is the validation the model was registered with.
  const v1::ValidationPoint& last = job.validation_curve(job.validation_curve_size() - 1);

  // One point with its histograms.
  v1::GetValidationPointRequest get;
  get.set_job_id(job.id());
  get.set_step(steps.front());
  v1::ValidationPoint first;
  grpc::Status s = training_->GetValidationPoint(Ctx(token_).get(), get, &first);
  ASSERT_TRUE(s.ok()) << Describe(s);
  EXPECT_GT(first.histograms_size(), 0);

  // The watchers saw each point as an event.
  int watched = 0;
  for (const v1::JobEvent& e : Events(job.id())) watched += e.has_validation_point();
  EXPECT_EQ(watched, static_cast<int>(steps.size()));

  // The registered model carries the job's curve, ending at its own metrics.
  v1::GetModelRequest get_model;
  get_model.set_model(job.model_ref());
  v1::ModelVersion model;
  s = catalog_->GetModel(Ctx(token_).get(), get_model, &model);
  ASSERT_TRUE(s.ok()) << Describe(s);
  ASSERT_EQ(model.validation_curve_size(), job.validation_curve_size());
  for (int i = 0; i < model.validation_curve_size(); ++i) {
    EXPECT_EQ(model.validation_curve(i).step(), steps[i]);
  }
  EXPECT_DOUBLE_EQ(last.metrics().at("fom"), model.metrics().at("fom"));

  // What a validation at a checkpoint costs (from the rank's log lines), for the record.
  v1::GetJobLogsRequest logs_request;
  logs_request.set_job_id(job.id());
  logs_request.set_rank(-1);
  v1::GetJobLogsResponse logs;
  ASSERT_TRUE(training_->GetJobLogs(Ctx(token_).get(), logs_request, &logs).ok());
  const std::regex timing(R"(validation: \d+ generated vs \d+ held-out showers.*\(([0-9.]+) s\))");
  std::vector<std::string> seconds;
  for (const v1::LogLine& line : logs.lines()) {
    std::smatch match;
    if (std::regex_search(line.text(), match, timing)) seconds.push_back(match[1].str());
    if (line.text().find("epoch 1/1 done") != std::string::npos) {
      std::cerr << "training: " << line.text() << "\n";
    }
  }
  EXPECT_EQ(seconds.size(), steps.size());
  std::cerr << "validation seconds per checkpoint:";
  for (const std::string& v : seconds) std::cerr << " " << v;
  std::cerr << "\n";
}

}  // namespace
}  // namespace gantry::testing
