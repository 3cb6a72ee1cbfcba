// PoolRepository against a real PostgreSQL: created once by name, specs stored whole and replaced
// by Update, listed by name, NOT_FOUND for unknown pools, deleted once.
#include "storage/pool_repository.h"

#include <gtest/gtest.h>

#include "tests/storage/storage_fixture.h"

namespace gantry::storage {
namespace {

using PoolRepositoryTest = StorageFixture;

gantry::v1::PoolSpec SlurmSpec(int max) {
  gantry::v1::PoolSpec spec;
  spec.set_price_per_device_hour(0.25);
  spec.set_max_workers(max);
  spec.set_slots_per_worker(2);
  (*spec.mutable_labels())["zone"] = "a";
  spec.mutable_provisioner()->mutable_slurm()->set_server_address("head:50051");
  spec.mutable_provisioner()->mutable_slurm()->add_sbatch_args("--account=calo");
  return spec;
}

TEST_F(PoolRepositoryTest, CreateUpdateListGetDelete) {
  PoolRepository pools(*db_);
  absl::StatusOr<gantry::v1::Pool> hpc = pools.Create("hpc", SlurmSpec(4));
  ASSERT_TRUE(hpc.ok()) << hpc.status();
  EXPECT_EQ(hpc->name(), "hpc");
  EXPECT_GT(hpc->created_at().seconds(), 0);
  EXPECT_EQ(pools.Create("hpc", SlurmSpec(8)).status().code(), absl::StatusCode::kAlreadyExists);
  ASSERT_TRUE(pools.Create("cloud", gantry::v1::PoolSpec()).ok());

  absl::StatusOr<gantry::v1::Pool> updated = pools.Update("hpc", SlurmSpec(16));
  ASSERT_TRUE(updated.ok()) << updated.status();
  EXPECT_EQ(updated->spec().max_workers(), 16);
  EXPECT_EQ(pools.Update("nope", SlurmSpec(1)).status().code(), absl::StatusCode::kNotFound);

  absl::StatusOr<std::vector<gantry::v1::Pool>> listed = pools.List();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].name(), "cloud");
  EXPECT_EQ((*listed)[1].name(), "hpc");
  EXPECT_EQ((*listed)[1].spec().provisioner().slurm().sbatch_args(0), "--account=calo");
  EXPECT_EQ((*listed)[1].spec().labels().at("zone"), "a");

  absl::StatusOr<gantry::v1::Pool> got = pools.Get("hpc");
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->spec().max_workers(), 16);
  EXPECT_EQ(pools.Get("nope").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(pools.Delete("hpc").ok());
  EXPECT_EQ(pools.Delete("hpc").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(pools.List()->size(), 1u);
}

}  // namespace
}  // namespace gantry::storage
