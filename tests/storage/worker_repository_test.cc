#include "storage/worker_repository.h"

#include <gtest/gtest.h>

#include "storage/migrations.h"
#include "storage/sql_util.h"
#include "tests/storage/storage_fixture.h"

namespace gantry::storage {
namespace {

gantry::v1::RegisterRequest Registration(const std::string& name, int slots) {
  gantry::v1::RegisterRequest r;
  r.set_name(name);
  r.set_slots(slots);
  r.set_device(gantry::v1::DEVICE_KIND_CPU);
  (*r.mutable_labels())["pool"] = "onprem";
  r.set_advertise_host("10.0.0.1");
  r.set_version("0.1.0");
  r.add_cached_datasets(std::string(64, 'b'));
  return r;
}

using WorkerRepositoryTest = StorageFixture;

TEST_F(WorkerRepositoryTest, UpsertIsStablePerName) {
  WorkerRepository workers(*db_);
  auto id = workers.Upsert(Registration("w1", 4));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->rfind("wrk-", 0), 0u);
  auto again = workers.Upsert(Registration("w1", 8));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *id);
  auto other = workers.Upsert(Registration("w2", 2));
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*other, *id);

  auto w = workers.Get(*id);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->name(), "w1");
  EXPECT_EQ(w->slots(), 8);
  EXPECT_EQ(w->free_slots(), 8);
  EXPECT_TRUE(w->connected());
  EXPECT_EQ(w->labels().at("pool"), "onprem");
  EXPECT_EQ(w->advertise_host(), "10.0.0.1");
  EXPECT_EQ(w->version(), "0.1.0");
  EXPECT_EQ(*workers.CachedDatasets(*id), std::vector<std::string>{std::string(64, 'b')});
  EXPECT_EQ(workers.Upsert(Registration("", 1)).status().code(),
            absl::StatusCode::kInvalidArgument);

  auto list = workers.List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name(), "w1");
  EXPECT_EQ((*list)[1].name(), "w2");
}

TEST_F(WorkerRepositoryTest, NoSecretOfARegistrationIsStored) {
  WorkerRepository workers(*db_);
  gantry::v1::RegisterRequest r = Registration("w1", 2);
  r.set_previous_credential("gwc_" + std::string(64, 'c'));
  r.set_generation_secret("generation-secret-0123456789");
  r.set_generation_endpoint("10.0.0.1:7000");
  ASSERT_TRUE(workers.Upsert(r).ok());
  const std::string stored = test_db_.Query("SELECT encode(registration, 'escape') FROM workers");
  EXPECT_EQ(stored.find(std::string(64, 'c')), std::string::npos) << stored;
  EXPECT_EQ(stored.find("generation-secret"), std::string::npos) << stored;
  EXPECT_NE(stored.find("10.0.0.1:7000"), std::string::npos) << "the rest is kept";
}

TEST_F(WorkerRepositoryTest, TheMigrationStripsSecretsStoredBeforeAndRevokesCredentials) {
  WorkerRepository workers(*db_);
  auto id = workers.Upsert(Registration("w1", 2));
  ASSERT_TRUE(id.ok());
  // A row as an older server stored it: the whole request, secrets included; a live credential.
  gantry::v1::RegisterRequest old = Registration("w1", 2);
  old.set_previous_credential("gwc_" + std::string(64, 'd'));
  old.set_generation_secret("old-generation-secret");
  ASSERT_TRUE(db_->Transact([&](Transaction& tx) {
                   tx.Exec("test_old_row",
                           "UPDATE workers SET registration = $2, credential_sha256 = $3 "
                           "WHERE id = $1",
                           *id, sql::Bytes(old), std::string(64, 'e'));
                   return absl::OkStatus();
                 }).ok());
  const Migration* strip = nullptr;
  for (const Migration& migration : EmbeddedMigrations()) {
    if (migration.version == 15) strip = &migration;
  }
  ASSERT_NE(strip, nullptr);
  ASSERT_NE(strip->backfill, nullptr);
  ASSERT_TRUE(db_->Transact([&](Transaction& tx) -> absl::Status {
                   tx.work().exec(strip->sql);
                   return strip->backfill(tx);
                 }).ok());
  const std::string stored = test_db_.Query("SELECT encode(registration, 'escape') FROM workers");
  EXPECT_EQ(stored.find(std::string(64, 'd')), std::string::npos) << stored;
  EXPECT_EQ(stored.find("old-generation-secret"), std::string::npos) << stored;
  EXPECT_EQ(test_db_.Query("SELECT count(*) FROM workers WHERE credential_sha256 IS NOT NULL"),
            "0\n");
  auto w = workers.Get(*id);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->advertise_host(), "10.0.0.1");
}

TEST_F(WorkerRepositoryTest, HeartbeatAndDisconnect) {
  WorkerRepository workers(*db_);
  auto id = workers.Upsert(Registration("w1", 4));
  ASSERT_TRUE(id.ok());
  const absl::Time now = absl::FromUnixMicros(1900000000123456);
  ASSERT_TRUE(workers.Heartbeat(*id, 1, {"c1", "c2"}, now).ok());
  auto w = workers.Get(*id);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w->free_slots(), 1);
  EXPECT_EQ(w->last_heartbeat().seconds(), 1900000000);
  EXPECT_EQ(w->last_heartbeat().nanos(), 123456000);
  EXPECT_EQ(*workers.CachedDatasets(*id), (std::vector<std::string>{"c1", "c2"}));
  ASSERT_TRUE(workers.MarkDisconnected(*id).ok());
  EXPECT_FALSE(workers.Get(*id)->connected());
  ASSERT_TRUE(workers.Heartbeat(*id, 2, {}, now).ok());
  EXPECT_TRUE(workers.Get(*id)->connected());
  EXPECT_EQ(workers.Heartbeat("wrk-none", 1, {}, now).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(workers.MarkDisconnected("wrk-none").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(workers.Get("wrk-none").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace gantry::storage
