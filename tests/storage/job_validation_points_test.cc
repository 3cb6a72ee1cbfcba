// The validation curve of JobRepository: points stored per step, listed in order, bounded,
// independent of checkpoint retention and deleted with the job.
#include <gtest/gtest.h>

#include <string>

#include "storage/job_repository.h"
#include "storage/transaction.h"
#include "tests/storage/storage_fixture.h"

namespace gantry::storage {
namespace {

using gantry::v1::ValidationPoint;

gantry::v1::JobSpec Spec() {
  gantry::v1::JobSpec spec;
  spec.set_model_preset("tiny");
  spec.set_dataset("toymc:events=100");
  spec.set_world_size(1);
  spec.mutable_hyper_parameters()->set_epochs(3);
  return spec;
}

ValidationPoint Point(int64_t step, double fom, int histogram_bins = 4) {
  ValidationPoint p;
  p.set_epoch(static_cast<int>(step / 10));
  p.set_step(step);
  (*p.mutable_metrics())["fom"] = fom;
  (*p.mutable_metrics())["mre_sampling_fraction"] = fom / 2;
  gantry::v1::Histogram* h = p.add_histograms();
  h->set_name("longitudinal_profile");
  for (int i = 0; i < histogram_bins; ++i) {
    h->add_reference(i);
    h->add_generated(i + 0.5);
  }
  return p;
}

int64_t CountRows(Database& db, const std::string& name, const std::string& sql,
                  const std::string& id) {
  int64_t n = -1;
  EXPECT_TRUE(db.Transact([&](Transaction& tx) -> absl::Status {
                  n = tx.Exec(name, sql, id)[0][0].as<int64_t>();
                  return absl::OkStatus();
                }).ok());
  return n;
}

using JobValidationPointsTest = StorageFixture;

TEST_F(JobValidationPointsTest, PointsAreListedByStepWithEventsAndHistogramsApart) {
  JobRepository jobs(*db_);
  auto job = jobs.Create("alice", Spec(), "");
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string id = job->id();
  ASSERT_TRUE(jobs.RecordValidationPoint(id, 0, Point(20, 0.5)).ok());
  ASSERT_TRUE(jobs.RecordValidationPoint(id, 0, Point(10, 0.9)).ok());
  ASSERT_TRUE(jobs.RecordValidationPoint(id, 0, Point(30, 0.3)).ok());

  auto curve = jobs.ListValidationPoints(id);
  ASSERT_TRUE(curve.ok()) << curve.status();
  ASSERT_EQ(curve->size(), 3u);
  EXPECT_EQ((*curve)[0].step(), 10);
  EXPECT_EQ((*curve)[1].step(), 20);
  EXPECT_EQ((*curve)[2].step(), 30);
  EXPECT_EQ((*curve)[0].epoch(), 1);
  EXPECT_DOUBLE_EQ((*curve)[0].metrics().at("fom"), 0.9);
  EXPECT_DOUBLE_EQ((*curve)[2].metrics().at("mre_sampling_fraction"), 0.15);
  EXPECT_GT((*curve)[0].time().seconds(), 1600000000);
  EXPECT_EQ((*curve)[0].histograms_size(), 0) << "the curve carries no histograms";

  auto one = jobs.GetValidationPoint(id, 20);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_DOUBLE_EQ(one->metrics().at("fom"), 0.5);
  ASSERT_EQ(one->histograms_size(), 1);
  EXPECT_EQ(one->histograms(0).name(), "longitudinal_profile");
  EXPECT_EQ(one->histograms(0).generated_size(), 4);
  EXPECT_EQ(jobs.GetValidationPoint(id, 15).status().code(), absl::StatusCode::kNotFound);

  // Each point appended a validation_point event (metrics, no histograms) for watchers.
  auto events = jobs.ListEvents(id, 0, 0);
  ASSERT_TRUE(events.ok());
  int points = 0;
  for (const auto& e : *events) {
    if (!e.has_validation_point()) continue;
    ++points;
    EXPECT_EQ(e.validation_point().histograms_size(), 0);
    EXPECT_TRUE(e.validation_point().metrics().contains("fom"));
    EXPECT_TRUE(e.validation_point().has_time());
  }
  EXPECT_EQ(points, 3);

  // Another job's curve is its own.
  auto other = jobs.Create("bob", Spec(), "");
  ASSERT_TRUE(other.ok());
  EXPECT_TRUE(jobs.ListValidationPoints(other->id())->empty());
}

TEST_F(JobValidationPointsTest, ARepeatedStepReplacesAndOlderAttemptsAreRefused) {
  JobRepository jobs(*db_);
  auto job = jobs.Create("alice", Spec(), "");
  ASSERT_TRUE(job.ok());
  const std::string id = job->id();
  ASSERT_TRUE(jobs.Transition(id, {gantry::v1::JOB_STATE_QUEUED}, gantry::v1::JOB_STATE_PLACING,
                              "Placed", "")
                  .ok());
  ASSERT_TRUE(jobs.Transition(id, {gantry::v1::JOB_STATE_PLACING}, gantry::v1::JOB_STATE_RUNNING,
                              "Running", "")
                  .ok());
  ASSERT_TRUE(jobs.RecordValidationPoint(id, 0, Point(10, 0.9)).ok());
  gantry::v1::Restart restart;
  restart.set_reason("RankFailed");
  restart.set_counted(true);
  ASSERT_TRUE(jobs.BeginRestart(id, {gantry::v1::JOB_STATE_RUNNING}, restart).ok());

  // The new attempt redoes step 10: its point replaces the first one.
  ASSERT_TRUE(jobs.RecordValidationPoint(id, 1, Point(10, 0.7)).ok());
  absl::Status stale = jobs.RecordValidationPoint(id, 0, Point(20, 0.1));
  EXPECT_EQ(stale.code(), absl::StatusCode::kFailedPrecondition) << stale;
  auto curve = jobs.ListValidationPoints(id);
  ASSERT_TRUE(curve.ok());
  ASSERT_EQ(curve->size(), 1u);
  EXPECT_DOUBLE_EQ((*curve)[0].metrics().at("fom"), 0.7);
  EXPECT_EQ((*curve)[0].attempt(), 1);

  EXPECT_EQ(jobs.RecordValidationPoint("job-unknown", 0, Point(1, 1)).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(JobValidationPointsTest, HistogramsAndPointCountAreBounded) {
  JobRepository jobs(*db_);
  auto job = jobs.Create("alice", Spec(), "");
  ASSERT_TRUE(job.ok());
  const std::string id = job->id();
  // 2 x 300,000 doubles: about 4.8 MB serialized, past the 4 MiB bound.
  absl::Status big = jobs.RecordValidationPoint(id, 0, Point(10, 1, 300000));
  EXPECT_EQ(big.code(), absl::StatusCode::kInvalidArgument) << big;
  EXPECT_TRUE(jobs.ListValidationPoints(id)->empty());

  // Fill the curve to its bound directly, then one more step is refused; a known step still
  // replaces.
  ASSERT_TRUE(db_->Transact([&](Transaction& tx) -> absl::Status {
                   tx.Exec("test_fill_points",
                           "INSERT INTO job_validation_points (job_id, step, epoch, attempt, "
                           "metrics, point) SELECT $1, s, 0, 0, '{}', '' FROM "
                           "generate_series(1, $2) s",
                           id, kMaxValidationPoints);
                   return absl::OkStatus();
                 })
                  .ok());
  absl::Status full = jobs.RecordValidationPoint(id, 0, Point(kMaxValidationPoints + 1, 1));
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_TRUE(jobs.RecordValidationPoint(id, 0, Point(5, 1)).ok());
  EXPECT_EQ(jobs.ListValidationPoints(id)->size(), static_cast<size_t>(kMaxValidationPoints));
}

TEST_F(JobValidationPointsTest, PointsOutliveCheckpointRetentionAndDieWithTheJob) {
  JobRepository jobs(*db_);
  auto job = jobs.Create("alice", Spec(), "");
  ASSERT_TRUE(job.ok());
  const std::string id = job->id();
  for (int64_t step : {10, 20, 30}) {
    gantry::v1::CheckpointSaved saved;
    saved.set_sha256(std::string(64, static_cast<char>('a' + step / 10)));
    saved.set_step(step);
    saved.set_size_bytes(100);
    ASSERT_TRUE(jobs.RecordCheckpoint(id, 0, saved).ok());
    ASSERT_TRUE(jobs.RecordValidationPoint(id, 0, Point(step, 1.0 / step)).ok());
  }
  ASSERT_TRUE(jobs.ExpireCheckpoints(id, 1).ok());
  EXPECT_EQ(CountRows(*db_, "test_live_checkpoints",
                      "SELECT count(*) FROM job_checkpoints WHERE job_id = $1 AND deleted_at IS "
                      "NULL",
                      id),
            1);
  EXPECT_EQ(jobs.ListValidationPoints(id)->size(), 3u) << "retention keeps every point";

  ASSERT_TRUE(db_->Transact([&](Transaction& tx) -> absl::Status {
                   tx.Exec("test_delete_job", "DELETE FROM jobs WHERE id = $1", id);
                   return absl::OkStatus();
                 })
                  .ok());
  EXPECT_EQ(CountRows(*db_, "test_points",
                      "SELECT count(*) FROM job_validation_points WHERE job_id = $1", id),
            0);
}

}  // namespace
}  // namespace gantry::storage
