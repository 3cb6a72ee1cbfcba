// The rank's data and model stages in-process, without a server or a rank process: RankInput on a
// real HDF5 file (checks, hold-out, leave-out band, condition and template fit, the prefetching
// pipeline) and BuildRankTrainer on its output (a fresh trainer that steps).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "showers/hdf5_io.h"
#include "showers/shower_file_reader.h"
#include "tests/gan/test_data.h"
#include "tests/support/temp_dir.h"
#include "workers/runner/rank_input.h"
#include "workers/runner/rank_model.h"
#include "workers/runner/rank_plan.h"

namespace gantry::runner {
namespace {

namespace v1 = ::gantry::v1;

class RankStagesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ = dir_.File("Ele_train.h5");
    ASSERT_TRUE(showers::WriteShowerFile(file_, gan::testing::FixedAngleShowers(40, 3)).ok());
    absl::StatusOr<std::shared_ptr<const showers::ShowerFileReader>> reader =
        showers::ShowerFileReader::Open(file_);
    ASSERT_TRUE(reader.ok()) << reader.status();
    reader_ = *reader;
    dataset_.sha256 = "abc";
    dataset_.local_path = file_;
    dataset_.energy_min_gev = 10;
    dataset_.energy_max_gev = 100;
  }

  static v1::Assignment AssignmentFor(const std::string& preset, int rank, int world_size) {
    v1::Assignment a;
    a.set_job_id("job-stages");
    a.set_rank(rank);
    a.set_world_size(world_size);
    a.set_threads(1);
    if (world_size > 1) {
      a.set_rendezvous_host("127.0.0.1");  // checked by the plan, never dialled here
      a.set_rendezvous_port(29500);
    }
    v1::JobSpec* spec = a.mutable_spec();
    spec->set_model_preset(preset);
    spec->set_dataset("file:///data/Ele_train.h5");
    spec->set_world_size(world_size);
    spec->mutable_hyper_parameters()->set_epochs(1);
    spec->mutable_hyper_parameters()->set_batch_per_rank(4);
    spec->mutable_hyper_parameters()->set_seed(9);
    spec->mutable_validation()->set_holdout_fraction(0.25);
    return a;
  }

  RankPlan Plan(const v1::Assignment& a) {
    absl::StatusOr<RankPlan> plan = PlanRank(a);
    EXPECT_TRUE(plan.ok()) << plan.status();
    return plan.ok() ? *std::move(plan) : RankPlan{};
  }

  RankLog Log() {
    return [this](const std::string& level, const std::string& text) {
      lines_.push_back(level + " " + text);
    };
  }
  bool Logged(const std::string& part) const {
    return std::any_of(lines_.begin(), lines_.end(),
                       [&](const std::string& line) { return absl::StrContains(line, part); });
  }

  gantry::testing::TempDir dir_;
  std::string file_;
  std::shared_ptr<const showers::ShowerFileReader> reader_;
  MaterializedDataset dataset_;
  std::vector<std::string> lines_;
};

TEST_F(RankStagesTest, InputOfRankZeroHoldsOutFitsAndStreamsTheTrainingEvents) {
  const RankPlan plan = Plan(AssignmentFor("tiny-template", 0, 1));
  RankInput input(plan, Log());
  ASSERT_TRUE(input.CheckFitsModel(*reader_).ok());
  v1::JobResult result;
  RankInput::Record(dataset_, "Ele", &result);
  EXPECT_EQ(result.particle(), v1::PARTICLE_ELECTRON);
  EXPECT_EQ(result.dataset_sha256(), "abc");

  std::optional<showers::ShowerSet> holdout;
  absl::StatusOr<TrainingInput> prepared =
      input.Prepare(reader_, "Ele", file_, /*pin_memory=*/false,
                    result.mutable_hyper_parameters(), &holdout);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  // A quarter held out and read on rank 0 (10 of 40), the rest streamed.
  ASSERT_TRUE(holdout.has_value());
  EXPECT_EQ(holdout->events(), 10);
  EXPECT_EQ(holdout->particle, "Ele");
  EXPECT_TRUE(Logged("hold-out: 10 events set aside for validation, 30 for training"));
  // tiny-template fits its template and conditions to the training events; one model config
  // leaves the stage, and the lineage records what it was fitted to.
  EXPECT_FALSE(prepared->shower_template.empty());
  EXPECT_FALSE(prepared->model.fit_conditions_to_data);
  EXPECT_EQ(result.hyper_parameters().count("ecal_fit"), 1u);
  EXPECT_EQ(result.hyper_parameters().at("prefetch_batches"), std::to_string(plan.prefetch_batches));

  // The model stage: a fresh trainer on that input steps.
  RankRunnerOptions options;
  options.work_dir = dir_.File("work");
  absl::StatusOr<std::unique_ptr<gan::Trainer>> trainer =
      BuildRankTrainer(plan, options, *std::move(prepared), Log());
  ASSERT_TRUE(trainer.ok()) << trainer.status();
  EXPECT_EQ((*trainer)->batch_size(), 4);
  ASSERT_TRUE((*trainer)->Step().ok());
  EXPECT_EQ((*trainer)->state().step, 1);
}

TEST_F(RankStagesTest, OtherRanksSplitAlikeWithoutReadingTheHoldOut) {
  const RankPlan plan0 = Plan(AssignmentFor("tiny", 0, 2));
  const RankPlan plan1 = Plan(AssignmentFor("tiny", 1, 2));
  std::optional<showers::ShowerSet> holdout0, holdout1;
  absl::StatusOr<HoldoutSplit> split0 = RankInput(plan0, Log()).Split(*reader_, "Ele", &holdout0);
  absl::StatusOr<HoldoutSplit> split1 = RankInput(plan1, Log()).Split(*reader_, "Ele", &holdout1);
  ASSERT_TRUE(split0.ok() && split1.ok());
  EXPECT_EQ(split0->train, split1->train);
  EXPECT_EQ(split0->holdout, split1->holdout);
  EXPECT_TRUE(holdout0.has_value());
  EXPECT_FALSE(holdout1.has_value());
}

TEST_F(RankStagesTest, ALeftOutBandIsSkippedAndABadOneNamesTheField) {
  v1::Assignment a = AssignmentFor("tiny", 0, 1);
  v1::EnergyBand* band = a.mutable_spec()->mutable_validation()->mutable_leave_out();
  band->set_centre_gev(50);
  band->set_half_width_gev(10);
  const RankPlan plan = Plan(a);
  std::optional<showers::ShowerSet> holdout;
  absl::StatusOr<HoldoutSplit> split = RankInput(plan, Log()).Split(*reader_, "Ele", &holdout);
  ASSERT_TRUE(split.ok()) << split.status();
  for (int64_t event : split->train) {
    const float e = reader_->energy_gev()[event];
    EXPECT_FALSE(e >= 40 && e <= 60) << "event " << event << " at " << e << " GeV";
  }
  EXPECT_TRUE(Logged("leave-out: "));

  band->set_centre_gev(500);  // outside the dataset's energies
  const RankPlan outside = Plan(a);
  split = RankInput(outside, Log()).Split(*reader_, "Ele", &holdout);
  EXPECT_EQ(split.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(split.status().message(), "spec.validation.leave_out"))
      << split.status();
}

TEST_F(RankStagesTest, AFileOfAnotherGridIsRefusedNamingThePreset) {
  const RankPlan plan = Plan(AssignmentFor("3dgan-51", 0, 1));
  const absl::Status refused = RankInput(plan, Log()).CheckFitsModel(*reader_);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(refused.message(), "preset 3dgan-51 needs")) << refused;
}

}  // namespace
}  // namespace gantry::runner
