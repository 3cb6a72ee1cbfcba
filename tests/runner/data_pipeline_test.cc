// Tests of the rank's input-pipeline settings (runner::ResolveDataPipeline, through PlanRank):
// automatic defaults, the memory cap of the queue, overrides from spec.data_pipeline, refusals.
#include <gtest/gtest.h>

#include <string>

#include "workers/runner/rank_plan.h"

namespace gantry::runner {
namespace {

namespace v1 = ::gantry::v1;

constexpr int64_t k25Cubed = 25 * 25 * 25;

TEST(DataPipelineTest, AutomaticDefaults) {
  RankPlan plan;
  v1::DataPipeline automatic;  // both 0
  ASSERT_TRUE(ResolveDataPipeline(automatic, 128 * k25Cubed, 2, &plan).ok());
  EXPECT_EQ(plan.prefetch_batches, 4);
  EXPECT_EQ(plan.loader_threads, 1);  // a 2-core machine: the trainer needs the cores
  ASSERT_TRUE(ResolveDataPipeline(automatic, 128 * k25Cubed, 16, &plan).ok());
  EXPECT_EQ(plan.loader_threads, 2);
  // 3dgan-51 at batch 1024: 266 MB a batch, so the queue holds 2 (512 MiB), never fewer than 1.
  ASSERT_TRUE(ResolveDataPipeline(automatic, 1024 * 51 * 51 * 25, 2, &plan).ok());
  EXPECT_EQ(plan.prefetch_batches, 2);
  ASSERT_TRUE(ResolveDataPipeline(automatic, int64_t{1} << 40, 2, &plan).ok());
  EXPECT_EQ(plan.prefetch_batches, 1);
}

TEST(DataPipelineTest, SpecOverridesAreTakenAsGiven) {
  RankPlan plan;
  v1::DataPipeline spec;
  spec.set_prefetch_batches(16);
  spec.set_loader_threads(3);
  ASSERT_TRUE(ResolveDataPipeline(spec, 1024 * 51 * 51 * 25, 2, &plan).ok());
  EXPECT_EQ(plan.prefetch_batches, 16);
  EXPECT_EQ(plan.loader_threads, 3);
}

TEST(DataPipelineTest, NegativeValuesAreRefusedNamingTheField) {
  RankPlan plan;
  v1::DataPipeline spec;
  spec.set_prefetch_batches(-1);
  absl::Status status = ResolveDataPipeline(spec, k25Cubed, 2, &plan);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("spec.data_pipeline.prefetch_batches"), std::string::npos)
      << status;
  spec.set_prefetch_batches(0);
  spec.set_loader_threads(-2);
  status = ResolveDataPipeline(spec, k25Cubed, 2, &plan);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("spec.data_pipeline.loader_threads"), std::string::npos)
      << status;

  // PlanRank resolves (and refuses) them from the assignment's spec.
  v1::Assignment a;
  a.set_job_id("job-p");
  a.set_world_size(1);
  v1::JobSpec* s = a.mutable_spec();
  s->set_model_preset("tiny");
  s->set_dataset("toymc:layout=25,events=16");
  s->set_world_size(1);
  s->mutable_hyper_parameters()->set_epochs(1);
  s->mutable_hyper_parameters()->set_batch_per_rank(4);
  s->mutable_data_pipeline()->set_prefetch_batches(7);
  absl::StatusOr<RankPlan> planned = PlanRank(a);
  ASSERT_TRUE(planned.ok()) << planned.status();
  EXPECT_EQ(planned->prefetch_batches, 7);
  EXPECT_GE(planned->loader_threads, 1);
  s->mutable_data_pipeline()->set_loader_threads(-1);
  planned = PlanRank(a);
  EXPECT_EQ(planned.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(planned.status().message().find("spec.data_pipeline.loader_threads"), std::string::npos)
      << planned.status();
}

}  // namespace
}  // namespace gantry::runner
