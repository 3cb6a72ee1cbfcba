#include "storage/database.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "storage/migrator.h"
#include "storage/tenant_repository.h"
#include "storage/transaction.h"
#include "tests/support/test_database.h"

namespace gantry::storage {
namespace {

TEST(DatabaseTest, UnreachableServerIsUnavailable) {
  auto db = Database::Create(
      "host=/nonexistent-gantry-socket-dir port=5432 dbname=x user=x "
      "connect_timeout=2");
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kUnavailable) << db.status();
}

TEST(DatabaseTest, ASlowStatementIsUnavailableAfterTheStatementTimeout) {
  gantry::testing::TestDatabase tdb;
  DatabaseOptions options;
  options.pool_size = 1;
  options.statement_timeout = absl::Milliseconds(300);
  auto db = Database::Create(tdb.dsn(), options);
  ASSERT_TRUE(db.ok()) << db.status();
  const int64_t failures = Database::UnavailableOnThisThread();
  const absl::Time start = absl::Now();
  const absl::Status slow = (*db)->Transact([](Transaction& tx) {
    tx.work().exec("SELECT pg_sleep(5)");
    return absl::OkStatus();
  });
  EXPECT_EQ(slow.code(), absl::StatusCode::kUnavailable) << slow;
  EXPECT_NE(slow.message().find("statement timeout"), std::string::npos) << slow;
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  EXPECT_EQ(Database::UnavailableOnThisThread(), failures + 1);
  // The connection is fine afterwards.
  EXPECT_TRUE((*db)->Ping().ok());
  EXPECT_EQ(Database::UnavailableOnThisThread(), failures + 1);
}

TEST(DatabaseTest, WaitingForAFreeConnectionIsBoundedByThePoolWait) {
  gantry::testing::TestDatabase tdb;
  DatabaseOptions options;
  options.pool_size = 1;
  options.pool_wait = absl::Milliseconds(300);
  auto db = Database::Create(tdb.dsn(), options);
  ASSERT_TRUE(db.ok()) << db.status();
  absl::Notification holding;
  absl::Notification release;
  std::thread holder([&] {
    EXPECT_TRUE((*db)
                    ->Transact([&](Transaction&) {
                      holding.Notify();
                      release.WaitForNotification();
                      return absl::OkStatus();
                    })
                    .ok());
  });
  holding.WaitForNotification();
  const absl::Time start = absl::Now();
  bool ran = false;
  const absl::Status busy = (*db)->Transact([&](Transaction&) {
    ran = true;
    return absl::OkStatus();
  });
  const absl::Duration waited = absl::Now() - start;
  // The pool's metrics while the holder still has the one connection.
  const Database::PoolStats during = (*db)->Stats();
  EXPECT_EQ(during.size, 1);
  EXPECT_EQ(during.in_use, 1);
  EXPECT_EQ(during.waiting, 0);
  EXPECT_EQ(during.timeouts, 1);
  EXPECT_GE(during.wait_seconds, 0.25);
  release.Notify();
  holder.join();
  EXPECT_EQ((*db)->Stats().in_use, 0);
  EXPECT_EQ(busy.code(), absl::StatusCode::kUnavailable) << busy;
  EXPECT_NE(busy.message().find("no free connection"), std::string::npos) << busy;
  EXPECT_FALSE(ran);
  EXPECT_GE(waited, absl::Milliseconds(250));
  EXPECT_LT(waited, absl::Seconds(3));
  EXPECT_TRUE((*db)->Ping().ok()) << "the pool works again once the connection is back";
}

TEST(DatabaseTest, AnUnansweredConnectIsUnavailableAfterTheConnectTimeout) {
  // A listening socket that never answers the startup packet: connecting hangs without a timeout.
  const std::string dir = ::testing::TempDir() + "/gantry-silent-" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/.s.PGSQL.5432";
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof(addr.sun_path));
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(fd, 8), 0);
  DatabaseOptions options;
  options.connect_timeout = absl::Seconds(2);
  const absl::Time start = absl::Now();
  auto db = Database::Create("host=" + dir + " port=5432 dbname=x user=x", options);
  const absl::Duration took = absl::Now() - start;
  close(fd);
  std::filesystem::remove_all(dir);
  ASSERT_FALSE(db.ok());
  EXPECT_EQ(db.status().code(), absl::StatusCode::kUnavailable) << db.status();
  // One attempt and one retry of about 2 s each.
  EXPECT_LT(took, absl::Seconds(10));
}

TEST(DatabaseTest, RejectsZeroPool) {
  gantry::testing::TestDatabase tdb;
  EXPECT_EQ(Database::Create(tdb.dsn(), 0).status().code(), absl::StatusCode::kInvalidArgument);
}

// Kills every server session of the test database from the outside.
void TerminateSessions(const gantry::testing::TestDatabase& tdb) {
  tdb.AdminQuery("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '" +
                 tdb.name() + "' AND pid <> pg_backend_pid()");
}

TEST(DatabaseTest, BrokenConnectionsAreReplaced) {
  gantry::testing::TestDatabase tdb;
  auto db = Database::Create(tdb.dsn(), 2);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(Migrator::Apply(**db).ok());
  TenantRepository tenants(**db);
  ASSERT_TRUE(tenants.CreateTenant("alice", false).ok());
  TerminateSessions(tdb);
  // The pooled connection is dead; the call must transparently reconnect.
  auto t = tenants.GetTenant("alice");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->name(), "alice");
}

TEST(DatabaseTest, OutageIsUnavailableAndRecovers) {
  gantry::testing::TestDatabase tdb;
  auto db = Database::Create(tdb.dsn(), 2);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(Migrator::Apply(**db).ok());
  TenantRepository tenants(**db);
  ASSERT_TRUE(tenants.CreateTenant("alice", false).ok());

  // Outage: no new sessions allowed, existing ones killed.
  tdb.AdminQuery("ALTER DATABASE \"" + tdb.name() + "\" ALLOW_CONNECTIONS false");
  TerminateSessions(tdb);
  auto during = tenants.GetTenant("alice");
  ASSERT_FALSE(during.ok());
  EXPECT_EQ(during.status().code(), absl::StatusCode::kUnavailable) << during.status();
  EXPECT_EQ(tenants.CreateTenant("bob", false).status().code(), absl::StatusCode::kUnavailable);

  tdb.AdminQuery("ALTER DATABASE \"" + tdb.name() + "\" ALLOW_CONNECTIONS true");
  auto after = tenants.GetTenant("alice");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_TRUE((*db)->Ping().ok());
}

TEST(DatabaseTest, ExceptionsBecomeStatuses) {
  gantry::testing::TestDatabase tdb;
  auto db = Database::Create(tdb.dsn(), 1);
  ASSERT_TRUE(db.ok());
  absl::Status syntax = (*db)->Transact([](Transaction& tx) {
    tx.work().exec("SELEKT nonsense");
    return absl::OkStatus();
  });
  EXPECT_EQ(syntax.code(), absl::StatusCode::kInternal) << syntax;
  ASSERT_TRUE((*db)
                  ->Transact([](Transaction& tx) {
                    tx.work().exec("CREATE TABLE u (k text PRIMARY KEY)");
                    tx.Exec("u_insert", "INSERT INTO u VALUES ($1)", "a");
                    return absl::OkStatus();
                  })
                  .ok());
  absl::Status dup = (*db)->Transact([](Transaction& tx) {
    tx.Exec("u_insert", "INSERT INTO u VALUES ($1)", "a");
    return absl::OkStatus();
  });
  EXPECT_EQ(dup.code(), absl::StatusCode::kAlreadyExists) << dup;
  // A callback's error rolls the transaction back.
  absl::Status rolled = (*db)->Transact([](Transaction& tx) {
    tx.Exec("u_insert", "INSERT INTO u VALUES ($1)", "b");
    return absl::FailedPreconditionError("changed my mind");
  });
  EXPECT_EQ(rolled.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(tdb.Query("SELECT k FROM u ORDER BY k"), "a\n");
  // The single pooled connection is still usable after all that.
  EXPECT_TRUE((*db)->Ping().ok());
}

TEST(DatabaseTest, ConcurrentCallsShareASmallPool) {
  gantry::testing::TestDatabase tdb;
  auto db = Database::Create(tdb.dsn(), 2);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE(Migrator::Apply(**db).ok());
  TenantRepository tenants(**db);
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      for (int j = 0; j < 10; ++j) {
        if (tenants.CreateTenant("t" + std::to_string(i) + "-" + std::to_string(j), false).ok())
          ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 80);
  auto page = tenants.ListTenants(1000, "");
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->items.size(), 80u);
}

}  // namespace
}  // namespace gantry::storage
