// TenantLimitsRepository against a real PostgreSQL: overrides stored per tenant, and the usage the
// server checks limits against.
#include "storage/tenant_limits_repository.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>

#include "storage/dataset_repository.h"
#include "storage/job_repository.h"
#include "tests/storage/storage_fixture.h"

namespace gantry::storage {
namespace {

using TenantLimitsRepositoryTest = StorageFixture;

TEST_F(TenantLimitsRepositoryTest, OverridesReplaceOnlyTheFieldsThatAreSet) {
  TenantLimitsRepository limits(*db_);
  auto none = limits.Get("alice");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->max_dataset_bytes.has_value());
  TenantLimits defaults{1000, 5, 2, 600};
  EXPECT_EQ(defaults.With(*none).max_concurrent_jobs, 5);

  TenantLimits::Overrides o;
  o.max_concurrent_jobs = 1;
  o.max_showers_per_minute = 0;  // unlimited for alice
  ASSERT_TRUE(limits.Set("alice", o).ok());
  auto got = limits.Get("alice");
  ASSERT_TRUE(got.ok()) << got.status();
  const TenantLimits effective = defaults.With(*got);
  EXPECT_EQ(effective.max_dataset_bytes, 1000);
  EXPECT_EQ(effective.max_concurrent_jobs, 1);
  EXPECT_EQ(effective.max_generation_streams, 2);
  EXPECT_EQ(effective.max_showers_per_minute, 0);
  EXPECT_FALSE(limits.Get("bob")->max_concurrent_jobs.has_value()) << "per tenant";

  o.max_dataset_bytes = -1;
  const absl::Status negative = limits.Set("alice", o);
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(negative.message().find("max_dataset_bytes"), std::string::npos) << negative;
  EXPECT_EQ(limits.Set("nobody", {}).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(limits.Get("nobody").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(TenantLimitsRepositoryTest, FairShareWeightsAndPoolQuotasAreStoredAndListed) {
  TenantLimitsRepository limits(*db_);
  TenantLimits::Overrides o;
  o.fair_share_weight = 2.5;
  o.max_slots_per_pool = {{"hpc", 8}, {"cloud", 0}};
  ASSERT_TRUE(limits.Set("alice", o).ok());
  TenantLimits::Overrides bob;
  bob.max_concurrent_jobs = 3;  // no scheduling override: not listed
  ASSERT_TRUE(limits.Set("bob", bob).ok());
  auto got = limits.Get("alice");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->fair_share_weight, 2.5);
  EXPECT_EQ(got->max_slots_per_pool, (std::map<std::string, int64_t>{{"cloud", 0}, {"hpc", 8}}));
  const TenantLimits effective = TenantLimits{}.With(*got);
  EXPECT_EQ(effective.fair_share_weight, 2.5);
  EXPECT_EQ(TenantLimits{}.With(*limits.Get("bob")).fair_share_weight, 1) << "the default";

  auto all = limits.SchedulingOverrides();
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ(all->at("alice").max_slots_per_pool.at("hpc"), 8);

  // Replaced as a whole: the quotas not given are gone.
  o.fair_share_weight.reset();
  o.max_slots_per_pool = {{"hpc", 4}};
  ASSERT_TRUE(limits.Set("alice", o).ok());
  got = limits.Get("alice");
  EXPECT_FALSE(got->fair_share_weight.has_value());
  EXPECT_EQ(got->max_slots_per_pool, (std::map<std::string, int64_t>{{"hpc", 4}}));

  for (double bad : {0.0, -1.0, 2e6, std::nan("")}) {
    TenantLimits::Overrides w;
    w.fair_share_weight = bad;
    const absl::Status st = limits.Set("alice", w);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("fair_share_weight"), std::string::npos) << st;
  }
  TenantLimits::Overrides negative;
  negative.max_slots_per_pool = {{"hpc", -2}};
  absl::Status st = limits.Set("alice", negative);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("max_slots_per_pool[hpc]: -2"), std::string::npos) << st;
  negative.max_slots_per_pool = {{"", 2}};
  EXPECT_EQ(limits.Set("alice", negative).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(limits.Get("alice")->max_slots_per_pool.at("hpc"), 4) << "refused sets change nothing";
}

TEST_F(TenantLimitsRepositoryTest, UsageCountsStoredBytesAndActiveJobs) {
  TenantLimitsRepository limits(*db_);
  DatasetRepository datasets(*db_);
  for (const char* name : {"a", "b"}) {
    gantry::v1::Dataset d;
    d.set_owner("alice");
    d.set_name(name);
    d.set_sha256(std::string(64, 'c'));
    d.set_size_bytes(300);
    ASSERT_TRUE(datasets.Create(d).ok());
  }
  EXPECT_EQ(*limits.DatasetBytes("alice"), 600);
  EXPECT_EQ(*limits.DatasetBytes("bob"), 0);

  JobRepository jobs(*db_);
  gantry::v1::JobSpec spec;
  spec.set_model_preset("tiny");
  spec.set_dataset("toymc:events=100");
  spec.set_world_size(1);
  auto first = jobs.Create("alice", spec, "");
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(jobs.Create("alice", spec, "").ok());
  EXPECT_EQ(*limits.ActiveJobs("alice"), 2);
  ASSERT_TRUE(jobs.Transition(first->id(), {gantry::v1::JOB_STATE_QUEUED},
                              gantry::v1::JOB_STATE_CANCELLED, "Cancelled", "")
                  .ok());
  EXPECT_EQ(*limits.ActiveJobs("alice"), 1) << "a finished job does not count";
}

}  // namespace
}  // namespace gantry::storage
