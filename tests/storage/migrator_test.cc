#include "storage/migrator.h"

#include <gtest/gtest.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "storage/database.h"
#include "storage/migrations.h"
#include "tests/support/test_database.h"

namespace gantry::storage {
namespace {

TEST(MigratorTest, FreshDatabaseGetsEveryMigrationThenNothing) {
  gantry::testing::TestDatabase tdb;
  auto db = Database::Create(tdb.dsn());
  ASSERT_TRUE(db.ok()) << db.status();
  EXPECT_EQ(*Migrator::CurrentVersion(**db), 0);

  auto first = Migrator::Apply(**db);
  ASSERT_TRUE(first.ok()) << first.status();
  // Numbers may skip (versions are reserved per branch), so count the migrations.
  const int count = static_cast<int>(EmbeddedMigrations().size());
  EXPECT_EQ(*first, count);
  EXPECT_EQ(*Migrator::CurrentVersion(**db), Migrator::LatestVersion());
  // Recorded with a description and a time.
  EXPECT_EQ(tdb.Query("SELECT count(*) FROM schema_version WHERE description <> '' "
                      "AND applied_at IS NOT NULL"),
            absl::StrCat(count, "\n"));
  // The tables exist.
  for (const char* table :
       {"tenants", "api_tokens", "join_tokens", "jobs", "job_events", "datasets", "models",
        "model_aliases", "model_tags", "model_metrics", "workers"}) {
    EXPECT_EQ(tdb.Query(absl::StrCat("SELECT to_regclass('", table, "') IS NOT NULL")), "t\n")
        << table;
  }

  auto second = Migrator::Apply(**db);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(*second, 0);
  EXPECT_EQ(tdb.Query("SELECT count(*) FROM schema_version"), absl::StrCat(count, "\n"));
}

TEST(MigratorTest, ConcurrentStartsApplyOnce) {
  gantry::testing::TestDatabase tdb;
  auto db1 = Database::Create(tdb.dsn());
  auto db2 = Database::Create(tdb.dsn());
  ASSERT_TRUE(db1.ok() && db2.ok());
  absl::StatusOr<int> a, b;
  std::thread t([&] { a = Migrator::Apply(**db1); });
  b = Migrator::Apply(**db2);
  t.join();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*a + *b, static_cast<int>(EmbeddedMigrations().size()));
}

TEST(MigratorTest, Version17DeletesTheRankCredentialKeyStoredBefore) {
  gantry::testing::TestDatabase tdb;
  auto db = Database::Create(tdb.dsn());
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE(Migrator::Apply(**db).ok());
  // A database at version 16 with the key an older server stored, upgraded.
  tdb.Query("DELETE FROM schema_version WHERE version >= 17");
  tdb.Query(absl::StrCat("INSERT INTO server_keys (name, secret) VALUES ('rank_credentials', '",
                         std::string(64, 'a'), "')"));
  auto applied = Migrator::Apply(**db);
  ASSERT_TRUE(applied.ok()) << applied.status();
  EXPECT_EQ(tdb.Query("SELECT count(*) FROM server_keys"), "0\n");
}

TEST(MigratorTest, NewerDatabaseIsRefused) {
  gantry::testing::TestDatabase tdb;
  auto db = Database::Create(tdb.dsn());
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(Migrator::Apply(**db).ok());
  const int newer = Migrator::LatestVersion() + 1;
  tdb.Query(absl::StrCat("INSERT INTO schema_version (version, description) VALUES (", newer,
                         ", 'from the future')"));
  auto applied = Migrator::Apply(**db);
  ASSERT_FALSE(applied.ok());
  EXPECT_EQ(applied.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(
      applied.status().message(),
      absl::StrCat("database schema version ", newer, " is newer than this gantry-server (max ",
                   Migrator::LatestVersion(), "); upgrade the server"));
}

}  // namespace
}  // namespace gantry::storage
