#include "storage/dataset_repository.h"

#include <gtest/gtest.h>

#include "storage/job_repository.h"
#include "tests/storage/storage_fixture.h"

namespace gantry::storage {
namespace {

using gantry::v1::Dataset;

Dataset MakeDataset(const std::string& owner, const std::string& name) {
  Dataset d;
  d.set_owner(owner);
  d.set_name(name);
  d.set_layout(gantry::v1::DATASET_LAYOUT_3DGAN_FIXED_ANGLE);
  d.add_shape(25);
  d.add_shape(25);
  d.add_shape(25);
  d.set_events(1000);
  d.mutable_energy_range_gev()->set_min(10);
  d.mutable_energy_range_gev()->set_max(500);
  d.set_particle(gantry::v1::PARTICLE_ELECTRON);
  d.set_sha256(std::string(64, 'a'));
  d.set_size_bytes(12345);
  (*d.mutable_labels())["source"] = "test";
  return d;
}

using DatasetRepositoryTest = StorageFixture;

TEST_F(DatasetRepositoryTest, CreateGetByIdOrName) {
  DatasetRepository datasets(*db_);
  auto d = datasets.Create(MakeDataset("alice", "ele"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->id().rfind("ds-", 0), 0u);
  EXPECT_GT(d->created_at().seconds(), 1600000000);
  EXPECT_EQ(d->events(), 1000);
  EXPECT_EQ(d->shape_size(), 3);
  EXPECT_EQ(d->energy_range_gev().max(), 500);
  EXPECT_EQ(d->labels().at("source"), "test");

  auto by_id = datasets.Get("alice", d->id());
  auto by_name = datasets.Get("alice", "ele");
  ASSERT_TRUE(by_id.ok() && by_name.ok());
  EXPECT_EQ(by_id->SerializeAsString(), d->SerializeAsString());
  EXPECT_EQ(by_name->id(), d->id());
  EXPECT_TRUE(datasets.Get("", d->id()).ok());  // admin / worker view

  // Isolation.
  EXPECT_EQ(datasets.Get("bob", d->id()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(datasets.Get("bob", "ele").status().code(), absl::StatusCode::kNotFound);
  // Names are unique per owner only.
  EXPECT_EQ(datasets.Create(MakeDataset("alice", "ele")).status().code(),
            absl::StatusCode::kAlreadyExists);
  auto bobs = datasets.Create(MakeDataset("bob", "ele"));
  ASSERT_TRUE(bobs.ok());
  EXPECT_EQ(datasets.Get("bob", "ele")->id(), bobs->id());
  EXPECT_EQ(datasets.Create(MakeDataset("alice", "")).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*datasets.CountBySha256(std::string(64, 'a')), 2);
}

TEST_F(DatasetRepositoryTest, ListFiltersAndPaginates) {
  DatasetRepository datasets(*db_);
  for (int i = 0; i < 5; ++i)
    ASSERT_TRUE(datasets.Create(MakeDataset("alice", "d" + std::to_string(i))).ok());
  ASSERT_TRUE(datasets.Create(MakeDataset("bob", "d0")).ok());
  auto p1 = datasets.List("alice", "", 2, "");
  ASSERT_TRUE(p1.ok());
  ASSERT_EQ(p1->items.size(), 2u);
  EXPECT_EQ(p1->items[0].name(), "d4");
  auto p2 = datasets.List("alice", "", 2, p1->next_page_token);
  auto p3 = datasets.List("alice", "", 2, p2->next_page_token);
  ASSERT_TRUE(p2.ok() && p3.ok());
  EXPECT_EQ(p2->items[0].name(), "d2");
  ASSERT_EQ(p3->items.size(), 1u);
  EXPECT_EQ(p3->items[0].name(), "d0");
  EXPECT_TRUE(p3->next_page_token.empty());
  auto named = datasets.List("alice", "d3", 0, "");
  ASSERT_EQ(named->items.size(), 1u);
  EXPECT_EQ(named->items[0].name(), "d3");
  EXPECT_EQ(datasets.List("", "d0", 0, "")->items.size(), 2u);
}

TEST_F(DatasetRepositoryTest, DeleteRefusedWhileAJobUsesIt) {
  DatasetRepository datasets(*db_);
  JobRepository jobs(*db_);
  auto d = datasets.Create(MakeDataset("alice", "busy"));
  ASSERT_TRUE(d.ok());
  gantry::v1::JobSpec spec;
  spec.set_dataset(d->id());
  spec.set_world_size(1);
  auto job = jobs.Create("alice", spec, "");
  ASSERT_TRUE(job.ok());

  auto refused = datasets.Delete("alice", d->id());
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find(job->id()), absl::string_view::npos);
  EXPECT_TRUE(datasets.Get("alice", d->id()).ok());
  // Another tenant cannot delete it at all.
  EXPECT_EQ(datasets.Delete("bob", d->id()).status().code(), absl::StatusCode::kNotFound);

  ASSERT_TRUE(jobs.Transition(job->id(), {gantry::v1::JOB_STATE_QUEUED},
                              gantry::v1::JOB_STATE_CANCELLED, "Cancelled", "")
                  .ok());
  auto deleted = datasets.Delete("alice", "busy");
  ASSERT_TRUE(deleted.ok()) << deleted.status();
  EXPECT_EQ(deleted->id(), d->id());
  EXPECT_EQ(datasets.Get("alice", d->id()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(*datasets.CountBySha256(std::string(64, 'a')), 0);
  EXPECT_EQ(datasets.Delete("alice", d->id()).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(DatasetRepositoryTest, DeleteRefusedForJobReferencingByName) {
  DatasetRepository datasets(*db_);
  JobRepository jobs(*db_);
  ASSERT_TRUE(datasets.Create(MakeDataset("alice", "named")).ok());
  gantry::v1::JobSpec spec;
  spec.set_dataset("named");
  auto job = jobs.Create("alice", spec, "");
  ASSERT_TRUE(job.ok());
  ASSERT_TRUE(jobs.Transition(job->id(), {gantry::v1::JOB_STATE_QUEUED},
                              gantry::v1::JOB_STATE_PLACING, "Placed", "")
                  .ok());
  EXPECT_EQ(datasets.Delete("alice", "named").status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A job of another tenant with the same dataset string does not block.
  ASSERT_TRUE(datasets.Create(MakeDataset("bob", "named")).ok());
  EXPECT_TRUE(datasets.Delete("bob", "named").ok());
}

}  // namespace
}  // namespace gantry::storage
