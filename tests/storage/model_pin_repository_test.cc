// ModelPinRepository against a real PostgreSQL: pins stored with their request and served model,
// replaced by a second Put of the same version, deleted once, refused for a version that does not
// exist.
#include "storage/model_pin_repository.h"

#include <gtest/gtest.h>

#include "storage/model_repository.h"
#include "tests/storage/storage_fixture.h"

namespace gantry::storage {
namespace {

using ModelPinRepositoryTest = StorageFixture;

gantry::v1::ModelVersion Registered(ModelRepository& models, const std::string& name) {
  gantry::v1::ModelVersion m;
  m.set_owner("alice");
  m.set_name(name);
  m.set_visibility(gantry::v1::VISIBILITY_PRIVATE);
  m.set_checkpoint_sha256(std::string(64, 'c'));
  m.set_checkpoint_size_bytes(42);
  absl::StatusOr<gantry::v1::ModelVersion> stored = models.Register(m);
  EXPECT_TRUE(stored.ok()) << stored.status();
  return stored.ok() ? *stored : m;
}

ModelPin Pin(const gantry::v1::ModelVersion& m, int max_batch) {
  ModelPin pin;
  pin.owner = m.owner();
  pin.name = m.name();
  pin.version = m.version();
  pin.request.set_model("alice/" + m.name() + ":1");
  pin.request.add_workers("g1");
  pin.request.mutable_batching()->set_max_batch_size(max_batch);
  pin.served.set_checkpoint_sha256(m.checkpoint_sha256());
  pin.served.set_model_ref(m.name() + ":1");
  return pin;
}

TEST_F(ModelPinRepositoryTest, PutReplacesListReturnsDeleteForgets) {
  ModelRepository models(*db_);
  ModelPinRepository pins(*db_);
  const gantry::v1::ModelVersion ele = Registered(models, "ele");
  const gantry::v1::ModelVersion pion = Registered(models, "pion");
  ASSERT_TRUE(pins.Put(Pin(ele, 4)).ok());
  ASSERT_TRUE(pins.Put(Pin(pion, 8)).ok());
  ASSERT_TRUE(pins.Put(Pin(ele, 16)).ok());  // replaces ele's pin
  absl::StatusOr<std::vector<ModelPin>> listed = pins.List();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  // Oldest change first: pion, then ele (changed last).
  EXPECT_EQ((*listed)[0].name, "pion");
  EXPECT_EQ((*listed)[1].name, "ele");
  EXPECT_EQ((*listed)[1].version, 1);
  EXPECT_EQ((*listed)[1].request.batching().max_batch_size(), 16);
  EXPECT_EQ((*listed)[1].request.workers(0), "g1");
  EXPECT_EQ((*listed)[1].served.checkpoint_sha256(), std::string(64, 'c'));

  EXPECT_TRUE(*pins.Delete("alice", "ele", 1));
  EXPECT_FALSE(*pins.Delete("alice", "ele", 1));
  ASSERT_EQ(pins.List()->size(), 1u);

  ModelPin ghost = Pin(ele, 4);
  ghost.version = 9;
  EXPECT_EQ(pins.Put(ghost).code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gantry::storage
