// Tests of building a JobSpec from `jobs submit` flags and a --spec JSON file.
#include "clients/cli/job_spec_builder.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

namespace gantry::cli {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<v1::JobSpec> Build(const std::vector<std::string>& args,
                                  std::map<std::string, std::string> files = {}) {
  auto parsed = ParseArgs("jobs submit", args, JobSpecFlags(), {});
  if (!parsed.ok()) return parsed.status();
  return BuildJobSpec(*parsed, [files](const std::string& path) -> absl::StatusOr<std::string> {
    auto it = files.find(path);
    if (it == files.end()) return absl::NotFoundError(path + " does not exist");
    return it->second;
  });
}

TEST(JobSpecBuilderTest, EveryFlagLandsInItsField) {
  auto spec = Build({"--name",
                     "ele-25",
                     "--preset",
                     "3dgan-25",
                     "--dataset",
                     "toymc:events=1000",
                     "--epochs",
                     "30",
                     "--batch",
                     "64",
                     "--lr",
                     "2e-4",
                     "--optimizer",
                     "adam",
                     "--precision",
                     "bf16-autocast",
                     "--world-size",
                     "4",
                     "--device",
                     "gpu",
                     "--gpus",
                     "1",
                     "--threads",
                     "2",
                     "--label",
                     "team=calo",
                     "--label",
                     "run=7",
                     "--selector",
                     "pool=onprem",
                     "--priority",
                     "-5",
                     "--seed",
                     "42",
                     "--model-name",
                     "ele",
                     "--visibility",
                     "public",
                     "--from-model",
                     "ele@champion",
                     "--checkpoint-every",
                     "5",
                     "--max-restarts",
                     "3",
                     "--no-validation"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->display_name(), "ele-25");
  EXPECT_EQ(spec->model_preset(), "3dgan-25");
  EXPECT_EQ(spec->dataset(), "toymc:events=1000");
  EXPECT_EQ(spec->hyper_parameters().epochs(), 30);
  EXPECT_EQ(spec->hyper_parameters().batch_per_rank(), 64);
  EXPECT_DOUBLE_EQ(spec->hyper_parameters().learning_rate(), 2e-4);
  EXPECT_EQ(spec->hyper_parameters().optimizer(), "adam");
  EXPECT_EQ(spec->hyper_parameters().precision(), v1::TRAINING_PRECISION_BF16_AUTOCAST);
  EXPECT_EQ(spec->hyper_parameters().seed(), 42u);
  EXPECT_EQ(spec->world_size(), 4);
  EXPECT_EQ(spec->resources_per_rank().device(), v1::DEVICE_KIND_GPU);
  EXPECT_EQ(spec->resources_per_rank().count(), 1);
  EXPECT_EQ(spec->resources_per_rank().threads(), 2);
  EXPECT_EQ(spec->labels().at("team"), "calo");
  EXPECT_EQ(spec->labels().at("run"), "7");
  EXPECT_EQ(spec->worker_selector().at("pool"), "onprem");
  EXPECT_EQ(spec->priority(), -5);
  EXPECT_EQ(spec->model_name(), "ele");
  EXPECT_EQ(spec->model_visibility(), v1::VISIBILITY_PUBLIC);
  EXPECT_EQ(spec->initial_model(), "ele@champion");
  EXPECT_EQ(spec->checkpoint_policy().every_epochs(), 5);
  EXPECT_EQ(spec->max_restarts(), 3);
  EXPECT_TRUE(spec->validation().disabled());
}

TEST(JobSpecBuilderTest, KeepBestSetsTheCheckpointPolicyField) {
  auto spec = Build({"--preset", "tiny", "--keep-best", "--keep-last", "2"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(spec->checkpoint_policy().keep_best());
  EXPECT_EQ(spec->checkpoint_policy().keep_last(), 2);
  auto plain = Build({"--preset", "tiny", "--keep-last", "2"});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->checkpoint_policy().keep_best());
  EXPECT_TRUE(plain->checkpoint_policy().best_metric().empty());
  EXPECT_FALSE(plain->checkpoint_policy().register_best());
  auto chosen =
      Build({"--preset", "tiny", "--keep-best", "--best-metric", "sep_mean", "--register-best"});
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_EQ(chosen->checkpoint_policy().best_metric(), "sep_mean");
  EXPECT_TRUE(chosen->checkpoint_policy().register_best());
}

TEST(JobSpecBuilderTest, LeaveOutSetsTheBandAndRefusesWhatIsNotOne) {
  auto spec = Build({"--preset", "tiny", "--leave-out", "100:20"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_DOUBLE_EQ(spec->validation().leave_out().centre_gev(), 100);
  EXPECT_DOUBLE_EQ(spec->validation().leave_out().half_width_gev(), 20);
  for (const char* bad : {"100", "100:0", "10:10", "a:b", "100:20:3", "100:-5"}) {
    auto refused = Build({"--preset", "tiny", "--leave-out", bad});
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.status().message().find("CENTRE:HALF_WIDTH"), std::string::npos)
        << refused.status();
  }
}

TEST(JobSpecBuilderTest, UntouchedSubMessagesStayUnset) {
  auto spec = Build({"--preset", "tiny"});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_FALSE(spec->has_hyper_parameters());
  EXPECT_FALSE(spec->has_resources_per_rank());
  EXPECT_FALSE(spec->has_validation());
}

TEST(JobSpecBuilderTest, SpecFileThenFlagsOverride) {
  const std::string json = R"({"displayName": "from-file", "modelPreset": "3dgan-51",
      "hyperParameters": {"epochs": 10, "batchPerRank": 32}, "worldSize": 2,
      "labels": {"a": "1"}})";
  auto spec =
      Build({"--spec", "job.json", "--epochs", "20", "--label", "b=2"}, {{"job.json", json}});
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->display_name(), "from-file");
  EXPECT_EQ(spec->model_preset(), "3dgan-51");
  EXPECT_EQ(spec->hyper_parameters().epochs(), 20);          // flag wins
  EXPECT_EQ(spec->hyper_parameters().batch_per_rank(), 32);  // kept from the file
  EXPECT_EQ(spec->world_size(), 2);
  EXPECT_EQ(spec->labels().size(), 2u);
}

TEST(JobSpecBuilderTest, SpecFileErrorsAreUsageErrors) {
  auto missing = Build({"--spec", "nope.json"});
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(IsUsageError(missing.status()));
  EXPECT_THAT(missing.status().message(), HasSubstr("--spec: nope.json does not exist"));

  auto unknown_field = Build({"--spec", "j.json"}, {{"j.json", R"({"epochz": 3})"}});
  ASSERT_FALSE(unknown_field.ok());
  EXPECT_TRUE(IsUsageError(unknown_field.status()));
  EXPECT_THAT(unknown_field.status().message(), HasSubstr("--spec j.json: not a valid JobSpec"));

  auto not_json = Build({"--spec", "j.json"}, {{"j.json", "epochs: 3"}});
  ASSERT_FALSE(not_json.ok());
  EXPECT_TRUE(IsUsageError(not_json.status()));
}

struct BadFlagCase {
  std::vector<std::string> args;
  std::string expected;  // a part of the message that names the flag
};

class JobSpecBadFlagTest : public ::testing::TestWithParam<BadFlagCase> {};

TEST_P(JobSpecBadFlagTest, ReportsTheFlag) {
  auto spec = Build(GetParam().args);
  ASSERT_FALSE(spec.ok());
  EXPECT_TRUE(IsUsageError(spec.status())) << spec.status();
  EXPECT_THAT(spec.status().message(), HasSubstr(GetParam().expected));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, JobSpecBadFlagTest,
    ::testing::Values(BadFlagCase{{"--epochs", "ten"}, "--epochs: 'ten' is not an integer"},
                      BadFlagCase{{"--batch", "6.5"}, "--batch: '6.5' is not an integer"},
                      BadFlagCase{{"--world-size", "4x"}, "--world-size"},
                      BadFlagCase{{"--lr", "fast"}, "--lr: 'fast' is not a finite number"},
                      BadFlagCase{{"--lr", "-0.1"}, "--lr: must be > 0"},
                      BadFlagCase{{"--lr", "0"}, "--lr: must be > 0"},
                      BadFlagCase{{"--seed", "-3"}, "--seed"},
                      BadFlagCase{{"--priority", "high"}, "--priority"},
                      BadFlagCase{{"--label", "team"}, "--label: 'team' is not of the form"},
                      BadFlagCase{{"--selector", "=onprem"}, "--selector"},
                      BadFlagCase{{"--device", "tpu"}, "--device: unknown device 'tpu'"},
                      BadFlagCase{{"--visibility", "world"}, "--visibility"},
                      BadFlagCase{{"--max-restarts", "99999999999"}, "--max-restarts"},
                      BadFlagCase{{"--checkpoint-every", ""}, "--checkpoint-every"},
                      BadFlagCase{{"--epochs"}, "--epochs needs a value"},
                      BadFlagCase{{"--epoch", "3"}, "unknown flag --epoch"}));

}  // namespace
}  // namespace gantry::cli
