// Tests of the torch-free runner pieces: the hold-out split, the rank plan (assignment checks),
// dataset materialisation for toymc:, file:// and ds- (downloaded from a real gantry-server into a
// sha256-verified cache) and checkpoint upload/fetch through WorkerService.
#include "workers/runner/dataset_source.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "showers/hdf5_io.h"
#include "showers/toy_mc.h"
#include "tests/server/server_fixture.h"
#include "tests/support/build_paths.h"
#include "tests/support/files.h"
#include "workers/runner/checkpoint_client.h"
#include "workers/runner/holdout_split.h"
#include "workers/runner/rank_plan.h"

namespace gantry::testing {
namespace {

namespace v1 = ::gantry::v1;
namespace fs = std::filesystem;
using runner::DatasetSource;
using runner::DatasetSourceOptions;
using runner::MaterializedDataset;

using ::gantry::testing::ReadFile;

// Options of a DatasetSource whose sandboxed inspections run this build's gantry-inspect.
DatasetSourceOptions SourceOptions(const std::string& server, const std::string& token,
                                   const std::string& cache_dir) {
  DatasetSourceOptions options{server, token, cache_dir};
  options.inspector.binary = GANTRY_INSPECT;
  return options;
}

// Simulates `events` toy showers with `seed`, writes them to `path` and returns them.
absl::StatusOr<showers::ShowerSet> WriteToyFile(const std::string& path, int64_t events,
                                                uint64_t seed) {
  showers::ToyMcConfig config;
  config.events = events;
  config.seed = seed;
  absl::StatusOr<showers::ShowerSet> set = showers::SimulateToyMc(config);
  if (!set.ok()) return set.status();
  RETURN_IF_ERROR(showers::WriteShowerFile(path, *set));
  return set;
}

TEST(HoldoutSplitTest, DeterministicDisjointAndComplete) {
  absl::StatusOr<runner::HoldoutSplit> a = runner::SplitHoldout(1000, 0.1, 42);
  absl::StatusOr<runner::HoldoutSplit> b = runner::SplitHoldout(1000, 0.1, 42);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->holdout, b->holdout);
  EXPECT_EQ(a->train, b->train);
  EXPECT_EQ(a->holdout.size(), 100u);
  EXPECT_EQ(a->train.size(), 900u);
  std::set<int64_t> all(a->holdout.begin(), a->holdout.end());
  for (int64_t i : a->train) EXPECT_TRUE(all.insert(i).second) << "event " << i << " in both";
  EXPECT_EQ(all.size(), 1000u);
  EXPECT_EQ(*all.begin(), 0);
  EXPECT_EQ(*all.rbegin(), 999);
  // Not just the first or last events: spread over the sample.
  EXPECT_LT(*std::min_element(a->holdout.begin(), a->holdout.end()), 100);
  EXPECT_GT(*std::max_element(a->holdout.begin(), a->holdout.end()), 900);

  absl::StatusOr<runner::HoldoutSplit> other = runner::SplitHoldout(1000, 0.1, 43);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->holdout, a->holdout);
}

TEST(KFoldSplitTest, FoldsAreDisjointCoverTheEventsAndTrainOnTheRest) {
  constexpr int64_t kEvents = 103;  // not a multiple of K: fold sizes differ by one
  constexpr int kFolds = 5;
  std::set<int64_t> validated;
  std::vector<size_t> sizes;
  for (int k = 0; k < kFolds; ++k) {
    absl::StatusOr<runner::HoldoutSplit> split = runner::SplitFolds(kEvents, kFolds, k, 7);
    ASSERT_TRUE(split.ok()) << split.status();
    sizes.push_back(split->holdout.size());
    // Validation and training events of one fold: disjoint, together every event.
    std::set<int64_t> all(split->holdout.begin(), split->holdout.end());
    for (int64_t i : split->train) EXPECT_TRUE(all.insert(i).second) << "event " << i << " twice";
    EXPECT_EQ(all.size(), static_cast<size_t>(kEvents));
    EXPECT_TRUE(std::is_sorted(split->train.begin(), split->train.end()));
    // Across folds: every event is validated exactly once.
    for (int64_t i : split->holdout) {
      EXPECT_TRUE(validated.insert(i).second) << "event " << i << " in two folds";
      EXPECT_GE(i, 0);
      EXPECT_LT(i, kEvents);
    }
    // The same seed gives the same fold (every job of a study agrees on it).
    absl::StatusOr<runner::HoldoutSplit> again = runner::SplitFolds(kEvents, kFolds, k, 7);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(again->holdout, split->holdout);
  }
  EXPECT_EQ(validated.size(), static_cast<size_t>(kEvents));
  EXPECT_EQ(*std::min_element(sizes.begin(), sizes.end()), 20u);
  EXPECT_EQ(*std::max_element(sizes.begin(), sizes.end()), 21u);
  // Another seed, other folds.
  absl::StatusOr<runner::HoldoutSplit> other = runner::SplitFolds(kEvents, kFolds, 0, 8);
  ASSERT_TRUE(other.ok());
  absl::StatusOr<runner::HoldoutSplit> first = runner::SplitFolds(kEvents, kFolds, 0, 7);
  ASSERT_TRUE(first.ok());
  EXPECT_NE(other->holdout, first->holdout);
}

TEST(KFoldSplitTest, RefusesFoldsTheDataCannotFill) {
  absl::StatusOr<runner::HoldoutSplit> too_many = runner::SplitFolds(10, 12, 0, 1);
  EXPECT_EQ(too_many.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_many.status().message().find("has only 10 events"), std::string::npos)
      << too_many.status();
  EXPECT_NE(too_many.status().message().find("at most 10 folds"), std::string::npos);
  EXPECT_EQ(runner::SplitFolds(10, 1, 0, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(runner::SplitFolds(10, 3, 3, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(runner::SplitFolds(10, 3, -1, 1).status().code(), absl::StatusCode::kInvalidArgument);
  // As many folds as events: one event each.
  absl::StatusOr<runner::HoldoutSplit> single = runner::SplitFolds(10, 10, 4, 1);
  ASSERT_TRUE(single.ok());
  EXPECT_EQ(single->holdout.size(), 1u);
  EXPECT_EQ(single->train.size(), 9u);
}

TEST(HoldoutSplitTest, EdgeCasesAndRefusals) {
  absl::StatusOr<runner::HoldoutSplit> none = runner::SplitHoldout(10, 0.0, 1);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->holdout.empty());
  EXPECT_EQ(none->train.size(), 10u);
  EXPECT_EQ(runner::SplitHoldout(10, 1.0, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(runner::SplitHoldout(10, -0.1, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(runner::SplitHoldout(1, 0.9, 1).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HoldoutSplitTest, SelectEventsCopiesCellsAndConditions) {
  showers::ToyMcConfig config;
  config.layout = showers::Layout::kVariableAngle3DGan;
  config.events = 5;
  config.seed = 2;
  absl::StatusOr<showers::ShowerSet> set = showers::SimulateToyMc(config);
  ASSERT_TRUE(set.ok()) << set.status();
  showers::ShowerSet picked = runner::SelectEvents(*set, {3, 1});
  ASSERT_EQ(picked.events(), 2);
  EXPECT_EQ(picked.energy_gev[0], set->energy_gev[3]);
  EXPECT_EQ(picked.theta_rad[1], set->theta_rad[1]);
  EXPECT_TRUE(std::equal(picked.event(0), picked.event(0) + set->cells_per_event(), set->event(3)));
  EXPECT_EQ(picked.shape, set->shape);
}

v1::Assignment GoodAssignment() {
  v1::Assignment a;
  a.set_job_id("job-1");
  a.set_rank(0);
  a.set_world_size(1);
  a.set_threads(1);
  v1::JobSpec* spec = a.mutable_spec();
  spec->set_model_preset("tiny");
  spec->set_dataset("toymc:layout=25,events=20");
  spec->set_world_size(1);
  spec->mutable_hyper_parameters()->set_epochs(3);
  spec->mutable_hyper_parameters()->set_batch_per_rank(4);
  spec->mutable_hyper_parameters()->set_learning_rate(5e-4);
  spec->mutable_hyper_parameters()->set_seed(9);
  spec->mutable_hyper_parameters()->mutable_loss_weights()->set_energy(0.5);
  spec->mutable_checkpoint_policy()->set_every_epochs(2);
  return a;
}

TEST(RankPlanTest, ResolvesTheModelAndSettings) {
  absl::StatusOr<runner::RankPlan> plan = runner::PlanRank(GoodAssignment());
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(plan->model.preset, "tiny");
  EXPECT_DOUBLE_EQ(plan->model.learning_rate, 5e-4);
  EXPECT_DOUBLE_EQ(plan->model.loss_weights[1], 0.5);
  // Unset weights keep the preset's.
  EXPECT_DOUBLE_EQ(plan->model.loss_weights[0], gan::PresetConfig("tiny")->loss_weights[0]);
  EXPECT_EQ(plan->epochs, 3);
  EXPECT_EQ(plan->batch_per_rank, 4);
  EXPECT_EQ(plan->seed, 9u);
  EXPECT_DOUBLE_EQ(plan->holdout_fraction, 0.1);
  EXPECT_TRUE(plan->validation);
  EXPECT_EQ(plan->checkpoint_every_epochs, 2);
  EXPECT_EQ(plan->keep_last, 1);
  EXPECT_NE(runner::CodeVersion().find('+'), std::string::npos);

  v1::Assignment disabled = GoodAssignment();
  disabled.mutable_spec()->mutable_validation()->set_disabled(true);
  plan = runner::PlanRank(disabled);
  ASSERT_TRUE(plan.ok());
  EXPECT_FALSE(plan->validation);
  EXPECT_EQ(plan->holdout_fraction, 0);
}

TEST(RankPlanTest, ABaselinePresetPlansAFitOnOneRank) {
  v1::Assignment a = GoodAssignment();
  a.mutable_spec()->set_model_preset("baseline-spots");
  a.mutable_spec()->mutable_hyper_parameters()->clear_epochs();  // no optimiser steps
  absl::StatusOr<runner::RankPlan> plan = runner::PlanRank(a);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_TRUE(plan->baseline.has_value());
  EXPECT_EQ(*plan->baseline, jobspec::BaselineKind::kSpots);
  EXPECT_EQ(plan->model.preset, "baseline-spots");
  EXPECT_EQ(plan->model.grid, gan::PresetConfig("3dgan-25")->grid);
  EXPECT_FALSE(runner::PlanRank(GoodAssignment())->baseline.has_value());

  v1::Assignment two = a;
  two.set_world_size(2);
  two.mutable_spec()->set_world_size(2);
  two.set_rendezvous_host("127.0.0.1");
  two.set_rendezvous_port(29500);
  EXPECT_NE(runner::PlanRank(two).status().message().find("spec.world_size"), std::string::npos)
      << runner::PlanRank(two).status();
  v1::Assignment tuned = a;
  tuned.set_initial_checkpoint_sha256(std::string(64, 'a'));
  EXPECT_EQ(runner::PlanRank(tuned).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(RankPlanTest, AcceptsAResumeAndTheCheckpointTriggers) {
  v1::Assignment a = GoodAssignment();
  a.set_attempt(3);
  a.set_resume_checkpoint_sha256(std::string(32, 'a') + std::string(32, '7'));
  a.set_collective_timeout_ms(30000);
  v1::CheckpointPolicy* policy = a.mutable_spec()->mutable_checkpoint_policy();
  policy->set_every_epochs(2);
  policy->set_every_steps(1000000);
  policy->set_every_minutes(10080);
  policy->set_keep_last(3);
  policy->set_keep_best(true);
  absl::StatusOr<runner::RankPlan> plan = runner::PlanRank(a);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->keep_best);
  EXPECT_EQ(plan->assignment.resume_checkpoint_sha256(), a.resume_checkpoint_sha256());
  EXPECT_EQ(plan->checkpoint_every_epochs, 2);
  EXPECT_EQ(plan->checkpoint_every_steps, 1000000);
  EXPECT_EQ(plan->checkpoint_every_minutes, 10080);
  EXPECT_EQ(plan->keep_last, 3);
  // keep_best scores checkpoints by validation: refused when validation is disabled.
  a.mutable_spec()->mutable_validation()->set_disabled(true);
  plan = runner::PlanRank(a);
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("spec.checkpoint_policy.keep_best"), std::string::npos)
      << plan.status();
}

TEST(RankPlanTest, RefusesBadAssignmentsNamingTheField) {
  struct Case {
    std::function<void(v1::Assignment&)> change;
    absl::StatusCode code;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](v1::Assignment& a) { a.set_rank(2); }, absl::StatusCode::kInvalidArgument,
       "assignment.rank"},
      {[](v1::Assignment& a) { a.clear_job_id(); }, absl::StatusCode::kInvalidArgument,
       "assignment.job_id"},
      {[](v1::Assignment& a) {
         a.set_world_size(2);
         a.mutable_spec()->set_world_size(2);
       },
       absl::StatusCode::kInvalidArgument, "assignment.rendezvous_host"},
      {[](v1::Assignment& a) { a.mutable_spec()->set_model_preset("huge"); },
       absl::StatusCode::kInvalidArgument, "spec.model_preset"},
      {[](v1::Assignment& a) { a.mutable_spec()->set_dataset("s3://bucket/x.h5"); },
       absl::StatusCode::kInvalidArgument, "spec.dataset"},
      {[](v1::Assignment& a) { a.mutable_spec()->mutable_hyper_parameters()->set_epochs(0); },
       absl::StatusCode::kInvalidArgument, "spec.hyper_parameters.epochs"},
      {[](v1::Assignment& a) {
         a.mutable_spec()->mutable_hyper_parameters()->set_optimizer("adam");
       },
       absl::StatusCode::kInvalidArgument, "spec.hyper_parameters.optimizer"},
      {[](v1::Assignment& a) { a.mutable_spec()->mutable_validation()->set_holdout_fraction(1.5); },
       absl::StatusCode::kInvalidArgument, "spec.validation.holdout_fraction"},
      {[](v1::Assignment& a) { a.set_resume_checkpoint_sha256("abc"); },
       absl::StatusCode::kInvalidArgument, "assignment.resume_checkpoint_sha256"},
      {[](v1::Assignment& a) { a.set_resume_checkpoint_sha256(std::string(64, 'G')); },
       absl::StatusCode::kInvalidArgument, "assignment.resume_checkpoint_sha256"},
      {[](v1::Assignment& a) { a.set_attempt(-1); }, absl::StatusCode::kInvalidArgument,
       "assignment.attempt"},
      {[](v1::Assignment& a) { a.set_collective_timeout_ms(-5); },
       absl::StatusCode::kInvalidArgument, "assignment.collective_timeout_ms"},
      {[](v1::Assignment& a) {
         a.mutable_spec()->mutable_checkpoint_policy()->set_every_steps(-1);
       },
       absl::StatusCode::kInvalidArgument, "spec.checkpoint_policy.every_steps"},
      {[](v1::Assignment& a) {
         a.mutable_spec()->mutable_checkpoint_policy()->set_every_steps(1000001);
       },
       absl::StatusCode::kInvalidArgument, "spec.checkpoint_policy.every_steps"},
      {[](v1::Assignment& a) {
         a.mutable_spec()->mutable_checkpoint_policy()->set_every_minutes(10081);
       },
       absl::StatusCode::kInvalidArgument, "spec.checkpoint_policy.every_minutes"},
      {[](v1::Assignment& a) {
         a.mutable_spec()->mutable_checkpoint_policy()->set_every_minutes(-0.5);
       },
       absl::StatusCode::kInvalidArgument, "spec.checkpoint_policy.every_minutes"},
  };
  for (const Case& c : cases) {
    v1::Assignment a = GoodAssignment();
    c.change(a);
    absl::StatusOr<runner::RankPlan> plan = runner::PlanRank(a);
    ASSERT_FALSE(plan.ok()) << c.field;
    EXPECT_EQ(plan.status().code(), c.code) << plan.status();
    EXPECT_NE(plan.status().message().find(c.field), std::string::npos) << plan.status();
  }
}

TEST(DatasetSourceTest, ToyMcIsSimulatedAndHashedByItsCanonicalSpec) {
  TempDir dir;
  DatasetSource source(SourceOptions("", "", dir.path()));
  // Key order and defaults do not change the hash: it is taken of the canonical spec.
  absl::StatusOr<MaterializedDataset> a =
      source.Materialize("toymc:layout=25,events=6,seed=4,emin=20,emax=40", "");
  absl::StatusOr<MaterializedDataset> b =
      source.Materialize("toymc:seed=4,emax=40,events=6,emin=20", "");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->showers.events(), 6);
  EXPECT_EQ(a->sha256, b->sha256);
  EXPECT_EQ(a->showers.cells, b->showers.cells);
  absl::StatusOr<showers::ToyMcConfig> config =
      showers::ParseToyMcSpec("toymc:layout=25,events=6,seed=4,emin=20,emax=40");
  EXPECT_EQ(a->sha256, Sha256Hex(showers::FormatToyMcSpec(*config)));
  EXPECT_EQ(a->energy_min_gev, 20);
  EXPECT_EQ(a->energy_max_gev, 40);
  EXPECT_EQ(a->theta_max_rad, 0);  // fixed angle
  absl::StatusOr<MaterializedDataset> variable =
      source.Materialize("toymc:layout=51,events=2,theta=70:110", "");
  ASSERT_TRUE(variable.ok()) << variable.status();
  EXPECT_NEAR(variable->theta_min_rad, 70 * M_PI / 180, 1e-9);
  EXPECT_NEAR(variable->theta_max_rad, 110 * M_PI / 180, 1e-9);
  for (float e : a->showers.energy_gev) {
    EXPECT_GE(e, 20);
    EXPECT_LE(e, 40);
  }
  absl::StatusOr<MaterializedDataset> other = source.Materialize("toymc:events=6,seed=5", "");
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->sha256, a->sha256);
  // A wrong expected hash, a bad spec and an unknown kind are refused naming the reference.
  absl::StatusOr<MaterializedDataset> mismatch =
      source.Materialize("toymc:events=6,seed=5", std::string(64, '0'));
  EXPECT_EQ(mismatch.status().code(), absl::StatusCode::kDataLoss);
  absl::StatusOr<MaterializedDataset> bad = source.Materialize("toymc:events=x", "");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("toymc:events=x"), std::string::npos) << bad.status();
  absl::StatusOr<MaterializedDataset> unknown = source.Materialize("s3://x", "");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("s3://x"), std::string::npos);
}

TEST(DatasetSourceTest, FileIsReadAndHashedByItsBytes) {
  TempDir dir;
  const std::string path = dir.File("Ele_toy.h5");
  absl::StatusOr<showers::ShowerSet> set = WriteToyFile(path, 5, 11);
  ASSERT_TRUE(set.ok()) << set.status();
  DatasetSource source(SourceOptions("", "", dir.path()));
  absl::StatusOr<MaterializedDataset> got = source.Materialize("file://" + path, "");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->sha256, Sha256Hex(ReadFile(path)));
  EXPECT_EQ(got->showers.events(), 5);
  EXPECT_EQ(got->showers.energy_gev, set->energy_gev);
  // Copied into the cache: the pinned copy is named by its hash.
  EXPECT_EQ(got->local_path, dir.path() + "/datasets/" + got->sha256 + ".h5");
  EXPECT_EQ(ReadFile(got->local_path), ReadFile(path));
  EXPECT_FALSE(got->from_cache);
  EXPECT_EQ(got->particle, "Ele");
  EXPECT_EQ(got->showers.particle, "Ele");
  EXPECT_EQ(got->energy_min_gev, *std::min_element(set->energy_gev.begin(), set->energy_gev.end()));
  EXPECT_EQ(got->energy_max_gev, *std::max_element(set->energy_gev.begin(), set->energy_gev.end()));
  EXPECT_EQ(got->theta_max_rad, 0);
  // The expected hash is checked when given.
  EXPECT_TRUE(source.Materialize("file://" + path, got->sha256).ok());
  EXPECT_EQ(source.Materialize("file://" + path, std::string(64, 'f')).status().code(),
            absl::StatusCode::kDataLoss);
  absl::StatusOr<MaterializedDataset> missing =
      source.Materialize("file://" + dir.File("none.h5"), "");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("none.h5"), std::string::npos);
  EXPECT_EQ(source.Materialize("file://relative.h5", "").status().code(),
            absl::StatusCode::kInvalidArgument);
}

// A rank reads file:// only under the daemon's --file-roots: through the resolved, opened file,
// never out of the roots by a symbolic link and never from the worker's own cache.
TEST(DatasetSourceTest, FileRootsConfineFileReferences) {
  TempDir dir;
  std::filesystem::create_directories(dir.File("data"));
  std::filesystem::create_directories(dir.File("cache"));
  const std::string path = dir.File("data/Ele_toy.h5");
  ASSERT_TRUE(WriteToyFile(path, 4, 12).ok());
  const std::string outside = dir.File("outside_Ele.h5");
  ASSERT_TRUE(WriteToyFile(outside, 4, 13).ok());
  DatasetSourceOptions options = SourceOptions("", "", dir.File("cache"));
  options.file_roots = *FileRoots::Parse(dir.File("data"), "file-roots");
  DatasetSource source(options);

  absl::StatusOr<MaterializedDataset> got = source.Materialize("file://" + path, "");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->sha256, Sha256Hex(ReadFile(path)));
  EXPECT_EQ(got->showers.events(), 4);
  EXPECT_EQ(got->particle, "Ele");

  EXPECT_EQ(source.Materialize("file://" + outside, "").status().code(),
            absl::StatusCode::kPermissionDenied);
  std::filesystem::create_symlink(outside, dir.File("data/link_Ele.h5"));
  EXPECT_EQ(source.Materialize("file://" + dir.File("data/link_Ele.h5"), "").status().code(),
            absl::StatusCode::kPermissionDenied);
  // The cached copy of the first file, reached through a link planted under the root.
  std::filesystem::create_symlink(got->local_path, dir.File("data/cached_Ele.h5"));
  absl::StatusOr<MaterializedDataset> cached =
      source.Materialize("file://" + dir.File("data/cached_Ele.h5"), "");
  EXPECT_EQ(cached.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(cached.status().message().find(dir.File("cache")), std::string::npos)
      << cached.status();
  EXPECT_EQ(source.Materialize("file:///etc/passwd", "").status().code(),
            absl::StatusCode::kPermissionDenied);

  // The job's owner may read only its own directory: a file of another tenant under the worker's
  // roots is refused, also through a link planted in the owner's directory.
  std::filesystem::create_directories(dir.File("data/alice"));
  std::filesystem::create_directories(dir.File("data/bob"));
  const std::string bobs = dir.File("data/bob/Ele_bob.h5");
  ASSERT_TRUE(WriteToyFile(bobs, 4, 14).ok());
  const std::string alices = dir.File("data/alice/Ele_alice.h5");
  ASSERT_TRUE(WriteToyFile(alices, 4, 15).ok());
  std::filesystem::create_symlink(bobs, dir.File("data/alice/Ele_link.h5"));
  DatasetSourceOptions owned = options;
  owned.owner_file_roots = *FileRoots::Parse(dir.File("data/alice"), "assignment.file_roots");
  DatasetSource for_alice(owned);
  EXPECT_TRUE(for_alice.Materialize("file://" + alices, "").ok());
  for (const std::string& foreign : {bobs, dir.File("data/alice/Ele_link.h5")}) {
    absl::Status s = for_alice.Materialize("file://" + foreign, "").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << foreign << ": " << s;
    EXPECT_NE(s.message().find("owner"), std::string::npos) << s;
  }
  owned.owner_file_roots = FileRoots();  // an assignment that names none
  EXPECT_EQ(DatasetSource(owned).Materialize("file://" + alices, "").status().code(),
            absl::StatusCode::kPermissionDenied);

  // No roots (a daemon without --file-roots): every file:// is refused.
  DatasetSourceOptions closed = SourceOptions("", "", dir.File("cache"));
  closed.file_roots = FileRoots();
  EXPECT_EQ(DatasetSource(closed).Materialize("file://" + path, "").status().code(),
            absl::StatusCode::kPermissionDenied);
}

// A tenant's file is first parsed by gantry-inspect in a sandboxed child: a file that is not a
// shower file is refused and not cached, and a parser that crashes, floods or hangs costs that
// child only. Without a helper that starts, nothing is parsed in-process: the dataset fails.
TEST(DatasetSourceTest, ATenantFileIsInspectedInASandboxedChildFirst) {
  TempDir dir;
  const std::string garbage = dir.File("Ele_garbage.h5");
  std::ofstream(garbage) << std::string(4096, 'x');
  DatasetSourceOptions options = SourceOptions("", "", dir.File("cache"));
  absl::StatusOr<MaterializedDataset> refused =
      DatasetSource(options).Materialize("file://" + garbage, "");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << refused.status();
  EXPECT_NE(refused.status().message().find("not a usable shower file"), std::string::npos)
      << refused.status();
  EXPECT_EQ(refused.status().message().find(dir.File("cache")), std::string::npos)
      << "no cache paths in messages: " << refused.status();

  options.inspector.binary = GANTRY_MISBEHAVING_INSPECTOR;
  options.inspector.timeout = absl::Seconds(3);
  for (const char* mode : {"MODE:segv", "MODE:alloc", "MODE:sleep", "MODE:lies"}) {
    const std::string hostile = dir.File(absl::StrCat("Ele_", mode + 5, ".h5"));
    std::ofstream(hostile) << mode << "\n";
    absl::StatusOr<MaterializedDataset> got =
        DatasetSource(options).Materialize("file://" + hostile, "");
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << mode << got.status();
    EXPECT_NE(got.status().message().find("could not be read as HDF5"), std::string::npos)
        << mode << ": " << got.status();
  }

  // No helper: the dataset fails (INTERNAL, saying what to fix); a good file is not read here.
  const std::string good = dir.File("Ele_good.h5");
  ASSERT_TRUE(WriteToyFile(good, 4, 12).ok());
  options.inspector.binary = dir.File("no-such-gantry-inspect");
  absl::StatusOr<MaterializedDataset> unchecked =
      DatasetSource(options).Materialize("file://" + good, "");
  EXPECT_EQ(unchecked.status().code(), absl::StatusCode::kInternal) << unchecked.status();
  EXPECT_NE(unchecked.status().message().find("gantry-inspect"), std::string::npos)
      << unchecked.status();
  // With the helper the same file is accepted, and cached once.
  absl::StatusOr<MaterializedDataset> accepted =
      DatasetSource(SourceOptions("", "", dir.File("cache"))).Materialize("file://" + good, "");
  ASSERT_TRUE(accepted.ok()) << accepted.status();
  EXPECT_EQ(accepted->showers.events(), 4);
  EXPECT_FALSE(accepted->from_cache);
}

TEST(DatasetSourceTest, FileIsCopiedOnceAndAChangedFileIsCopiedAgain) {
  TempDir dir;
  const std::string path = dir.File("Ele_copy.h5");
  absl::StatusOr<showers::ShowerSet> set = WriteToyFile(path, 4, 12);
  ASSERT_TRUE(set.ok()) << set.status();
  DatasetSource source(SourceOptions("", "", dir.File("cache")));
  absl::StatusOr<MaterializedDataset> first = source.Materialize("file://" + path, "");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->from_cache);
  // A second job: reused from the cache (the source's key comes from the (path, size, mtime)
  // index, so the source is not even hashed again).
  absl::StatusOr<MaterializedDataset> second =
      DatasetSource(SourceOptions("", "", dir.File("cache"))).Materialize("file://" + path, "");
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->from_cache);
  EXPECT_EQ(second->local_path, first->local_path);
  EXPECT_EQ(second->showers.energy_gev, set->energy_gev);
  // Rewritten with other events: a new key and a new entry beside the old one.
  absl::StatusOr<showers::ShowerSet> other = WriteToyFile(path, 4, 13);
  ASSERT_TRUE(other.ok()) << other.status();
  absl::StatusOr<MaterializedDataset> changed = source.Materialize("file://" + path, "");
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_FALSE(changed->from_cache);
  EXPECT_NE(changed->sha256, first->sha256);
  EXPECT_EQ(changed->sha256, Sha256Hex(ReadFile(path)));
  EXPECT_EQ(changed->showers.energy_gev, other->energy_gev);
  absl::StatusOr<std::unique_ptr<runner::DatasetCache>> cache =
      runner::DatasetCache::Create({dir.File("cache")});
  ASSERT_TRUE(cache.ok());
  EXPECT_EQ((*cache)->Summary().keys.size(), 2u);
}

TEST(DatasetSourceTest, ToyMcIsSimulatedOncePerWorkerAndReadBackFromTheCache) {
  TempDir dir;
  const std::string spec = "toymc:layout=51,events=5,seed=8,theta=70:110";
  absl::StatusOr<MaterializedDataset> first =
      DatasetSource(SourceOptions("", "", dir.path())).Materialize(spec, "");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->from_cache);
  EXPECT_EQ(first->local_path, dir.path() + "/datasets/" + first->sha256 + ".h5");
  // The cached file holds exactly the simulated sample.
  absl::StatusOr<showers::ToyMcConfig> config = showers::ParseToyMcSpec(spec);
  ASSERT_TRUE(config.ok());
  absl::StatusOr<showers::ShowerSet> simulated = showers::SimulateToyMc(*config);
  ASSERT_TRUE(simulated.ok());
  EXPECT_EQ(first->showers.cells, simulated->cells);
  EXPECT_EQ(first->showers.energy_gev, simulated->energy_gev);
  EXPECT_EQ(first->showers.theta_rad, simulated->theta_rad);
  EXPECT_EQ(first->showers.layout, showers::Layout::kVariableAngle3DGan);
  // Another job (another rank process, here another DatasetSource) reads the cached file.
  absl::StatusOr<MaterializedDataset> second =
      DatasetSource(SourceOptions("", "", dir.path())).Materialize(spec, first->sha256);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_TRUE(second->from_cache);
  EXPECT_EQ(second->local_path, first->local_path);
  EXPECT_EQ(second->showers.shape, first->showers.shape);
  EXPECT_EQ(second->showers.energy_gev, first->showers.energy_gev);
  EXPECT_EQ(second->showers.theta_rad, first->showers.theta_rad);
  EXPECT_EQ(second->showers.cells, first->showers.cells);
  EXPECT_EQ(second->showers.particle, first->showers.particle);
  EXPECT_NEAR(second->theta_min_rad, 70 * M_PI / 180, 1e-12);
  EXPECT_EQ(second->energy_max_gev, first->energy_max_gev);
  // Without the events: ranges and the pinned path only.
  DatasetSourceOptions lean = SourceOptions("", "", dir.path());
  lean.load_showers = false;
  absl::StatusOr<MaterializedDataset> third = DatasetSource(lean).Materialize(spec, "");
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_TRUE(third->from_cache);
  EXPECT_EQ(third->showers.events(), 0);
  EXPECT_TRUE(third->showers.cells.empty());
  EXPECT_EQ(third->local_path, first->local_path);
  EXPECT_NEAR(third->theta_max_rad, 110 * M_PI / 180, 1e-12);
  ASSERT_NE(third->lease, nullptr);
  EXPECT_TRUE(third->lease->valid());
}

class RunnerServerTest : public ServerFixture {
 protected:
  // A fresh worker's credential: what a daemon reads datasets with (the join token only
  // registers).
  std::string WorkerCredential() {
    v1::CreateTokenResponse join;
    grpc::Status s = admin_->CreateJoinToken(Ctx(admin_token_).get(), {}, &join);
    EXPECT_TRUE(s.ok()) << Describe(s);
    v1::RegisterRequest request;
    request.set_name(absl::StrCat("runner-test-", ++workers_));
    request.set_slots(1);
    request.set_advertise_host("127.0.0.1");
    v1::RegisterResponse registered;
    s = worker_->Register(Ctx(join.token()).get(), request, &registered);
    EXPECT_TRUE(s.ok()) << Describe(s);
    return registered.worker_credential();
  }

  // The credential the server gives the ranks of `job_id` attempt 0 (Assignment.rank_credential).
  std::string RankCredential(const std::string& job_id) {
    return IssueRankCredential(job_id, 0, "wrk-runner-test");
  }

  int workers_ = 0;

  v1::Dataset UploadToyFile(const std::string& token, const std::string& name, std::string* bytes) {
    showers::ToyMcConfig config;
    config.events = 12;
    config.seed = 21;
    config.energy_min_gev = 20;
    config.energy_max_gev = 60;
    absl::StatusOr<showers::ShowerSet> set = showers::SimulateToyMc(config);
    EXPECT_TRUE(set.ok());
    const std::string path = dir_.File(name + ".h5");
    EXPECT_TRUE(showers::WriteShowerFile(path, *set).ok());
    *bytes = ReadFile(path);
    v1::Dataset dataset;
    auto ctx = Ctx(token, 30000);
    auto writer = datasets_->UploadDataset(ctx.get(), &dataset);
    v1::UploadDatasetRequest header;
    header.mutable_header()->set_name(name);
    header.mutable_header()->set_size_bytes(bytes->size());
    header.mutable_header()->set_file_name("Ele_" + name + ".h5");
    writer->Write(header);
    for (size_t at = 0; at < bytes->size(); at += 100000) {
      v1::UploadDatasetRequest chunk;
      chunk.set_chunk(bytes->substr(at, 100000));
      writer->Write(chunk);
    }
    writer->WritesDone();
    grpc::Status s = writer->Finish();
    EXPECT_TRUE(s.ok()) << Describe(s);
    return dataset;
  }

  std::string SubmitJob() {
    const std::string tenant = NewTenant("physics");
    v1::SubmitJobRequest request;
    *request.mutable_spec() = GoodSpec();
    v1::Job job;
    grpc::Status s = training_->SubmitJob(Ctx(tenant).get(), request, &job);
    EXPECT_TRUE(s.ok()) << Describe(s);
    // The server's side of a placement, as the test plays the daemon: attempt 0 runs with its
    // ranks on the test's worker (what checkpoint uploads need).
    db_.Query("UPDATE jobs SET state = 'JOB_STATE_RUNNING' WHERE id = '" + job.id() + "'");
    for (int rank = 0; rank < std::max(1, job.spec().world_size()); ++rank) {
      db_.Query("INSERT INTO job_placements (job_id, attempt, rank, worker_id) VALUES ('" +
                job.id() + "', 0, " + std::to_string(rank) + ", 'wrk-runner-test')");
    }
    return job.id();
  }
};

TEST_F(RunnerServerTest, UploadedDatasetIsDownloadedIntoTheCacheAndReused) {
  const std::string tenant = NewTenant("calo");
  std::string bytes;
  const v1::Dataset dataset = UploadToyFile(tenant, "electrons", &bytes);
  ASSERT_FALSE(dataset.id().empty());
  ASSERT_EQ(dataset.sha256(), Sha256Hex(bytes));
  TempDir cache;
  DatasetSourceOptions options =
      SourceOptions(server_->address(), WorkerCredential(), cache.path());
  DatasetSource source(options);

  absl::StatusOr<MaterializedDataset> got = source.Materialize(dataset.id(), dataset.sha256());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_FALSE(got->from_cache);
  EXPECT_EQ(got->downloaded_bytes, static_cast<int64_t>(bytes.size()));
  EXPECT_EQ(got->sha256, dataset.sha256());
  EXPECT_EQ(got->local_path, cache.path() + "/datasets/" + dataset.sha256() + ".h5");
  EXPECT_EQ(ReadFile(got->local_path), bytes);
  EXPECT_EQ(got->showers.events(), 12);
  EXPECT_EQ(got->showers.particle, "Ele");

  // Without an expected hash the server's announced one is verified and used.
  TempDir cache2;
  absl::StatusOr<MaterializedDataset> announced =
      DatasetSource(SourceOptions(server_->address(), options.token, cache2.path()))
          .Materialize(dataset.id(), "");
  ASSERT_TRUE(announced.ok()) << announced.status();
  EXPECT_EQ(announced->sha256, dataset.sha256());

  // A mismatch against the assignment's hash is DATA_LOSS and leaves nothing in the cache.
  TempDir cache3;
  const std::string wrong(64, 'e');
  absl::StatusOr<MaterializedDataset> mismatch =
      DatasetSource(SourceOptions(server_->address(), options.token, cache3.path()))
          .Materialize(dataset.id(), wrong);
  ASSERT_EQ(mismatch.status().code(), absl::StatusCode::kDataLoss) << mismatch.status();
  EXPECT_NE(mismatch.status().message().find(dataset.id()), std::string::npos);
  EXPECT_TRUE(fs::is_empty(cache3.path() + "/datasets"));

  // The cached copy is reused without the server.
  ASSERT_EQ(StopServer(), 0);
  absl::StatusOr<MaterializedDataset> again = source.Materialize(dataset.id(), dataset.sha256());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->from_cache);
  EXPECT_EQ(again->downloaded_bytes, 0);
  EXPECT_EQ(again->showers.energy_gev, got->showers.energy_gev);

  // Another job on the same worker (a new DatasetSource) does not download it again.
  absl::StatusOr<MaterializedDataset> second_job =
      DatasetSource(options).Materialize(dataset.id(), dataset.sha256());
  ASSERT_TRUE(second_job.ok()) << second_job.status();
  EXPECT_TRUE(second_job->from_cache);
  EXPECT_EQ(second_job->downloaded_bytes, 0);

  // A corrupted cache entry is not trusted: with the server down it fails instead.
  std::ofstream(got->local_path, std::ios::binary | std::ios::app) << "junk";
  absl::StatusOr<MaterializedDataset> corrupt = source.Materialize(dataset.id(), dataset.sha256());
  EXPECT_FALSE(corrupt.ok());
  EXPECT_EQ(corrupt.status().code(), absl::StatusCode::kUnavailable) << corrupt.status();
  EXPECT_NE(corrupt.status().message().find(dataset.id()), std::string::npos);
}

TEST_F(RunnerServerTest, CorruptedCacheFileIsDetectedAndDownloadedAgain) {
  const std::string tenant = NewTenant("calo");
  std::string bytes;
  const v1::Dataset dataset = UploadToyFile(tenant, "flipped", &bytes);
  TempDir cache;
  DatasetSourceOptions options =
      SourceOptions(server_->address(), WorkerCredential(), cache.path());
  options.load_showers = false;
  absl::StatusOr<MaterializedDataset> got =
      DatasetSource(options).Materialize(dataset.id(), dataset.sha256());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->downloaded_bytes, static_cast<int64_t>(bytes.size()));
  EXPECT_TRUE(got->showers.cells.empty());
  // The ranges without the events (recorded when the entry was filled).
  absl::StatusOr<showers::ShowerSet> events = showers::ReadShowerFile(got->local_path);
  ASSERT_TRUE(events.ok()) << events.status();
  const auto [lo, hi] = std::minmax_element(events->energy_gev.begin(), events->energy_gev.end());
  EXPECT_EQ(got->energy_min_gev, *lo);
  EXPECT_EQ(got->energy_max_gev, *hi);
  EXPECT_GE(*lo, 20);
  EXPECT_LE(*hi, 60);
  const std::string path = got->local_path;
  got = absl::UnknownError("released");
  // One flipped byte in the middle: same size, different content.
  {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(static_cast<std::streamoff>(bytes.size() / 2));
    f.put(static_cast<char>(bytes[bytes.size() / 2] ^ 0x40));
  }
  ASSERT_EQ(fs::file_size(path), bytes.size());
  ASSERT_NE(ReadFile(path), bytes);
  absl::StatusOr<MaterializedDataset> again =
      DatasetSource(options).Materialize(dataset.id(), dataset.sha256());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->from_cache);
  EXPECT_EQ(again->downloaded_bytes, static_cast<int64_t>(bytes.size()));
  EXPECT_EQ(ReadFile(path), bytes);
  absl::StatusOr<MaterializedDataset> third =
      DatasetSource(options).Materialize(dataset.id(), dataset.sha256());
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_TRUE(third->from_cache);
  EXPECT_EQ(third->downloaded_bytes, 0);
}

TEST_F(RunnerServerTest, UnknownDatasetAndBadTokenAreRefused) {
  TempDir cache;
  absl::StatusOr<MaterializedDataset> missing =
      DatasetSource(SourceOptions(server_->address(), WorkerCredential(), cache.path()))
          .Materialize("ds-00000000-0000-0000-0000-000000000000", "");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_NE(missing.status().message().find("ds-00000000"), std::string::npos);
  absl::StatusOr<MaterializedDataset> unauthenticated =
      DatasetSource(SourceOptions(server_->address(), "gjt_wrong", cache.path()))
          .Materialize("ds-00000000-0000-0000-0000-000000000000", "");
  EXPECT_EQ(unauthenticated.status().code(), absl::StatusCode::kUnauthenticated)
      << unauthenticated.status();
}

TEST_F(RunnerServerTest, CheckpointUploadAndFetchRoundTrip) {
  const std::string job_id = SubmitJob();
  ASSERT_FALSE(job_id.empty());
  // 2.5 MiB of random bytes: three chunks.
  std::string bytes(5 << 19, '\0');
  std::mt19937 rng(3);
  for (char& c : bytes) c = static_cast<char>(rng());
  const std::string path = dir_.File("model.ckpt");
  std::ofstream(path, std::ios::binary) << bytes;

  runner::CheckpointClient client(server_->address(), RankCredential(job_id));
  absl::StatusOr<runner::UploadedCheckpoint> up = client.Upload(job_id, 3, 42, path);
  ASSERT_TRUE(up.ok()) << up.status();
  EXPECT_EQ(up->sha256, Sha256Hex(bytes));
  EXPECT_EQ(up->size_bytes, static_cast<int64_t>(bytes.size()));

  absl::StatusOr<runner::UploadedCheckpoint> down = client.Fetch(up->sha256, dir_.File("back"));
  ASSERT_TRUE(down.ok()) << down.status();
  EXPECT_EQ(ReadFile(dir_.File("back")), bytes);
  EXPECT_FALSE(fs::exists(dir_.File("back.part")));

  // A rank credential acts for its own job only.
  EXPECT_EQ(client.Upload("job-00000000-0000-0000-0000-000000000000", 1, 1, path).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(client.Fetch(std::string(64, 'a'), dir_.File("none")).status().code(),
            absl::StatusCode::kNotFound);
  runner::CheckpointClient stranger(server_->address(), "gjt_wrong");
  EXPECT_EQ(stranger.Upload(job_id, 1, 1, path).status().code(),
            absl::StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace gantry::testing
