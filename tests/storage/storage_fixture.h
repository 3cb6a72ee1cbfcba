// StorageFixture: a gtest fixture with a fresh, migrated database and tenants "alice" and "bob".
#ifndef GANTRY_TESTS_STORAGE_STORAGE_FIXTURE_H_
#define GANTRY_TESTS_STORAGE_STORAGE_FIXTURE_H_

#include <gtest/gtest.h>

#include <memory>

#include "storage/database.h"
#include "storage/migrator.h"
#include "storage/tenant_repository.h"
#include "tests/support/test_database.h"

namespace gantry::storage {

class StorageFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    auto db = Database::Create(test_db_.dsn(), 4);
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
    auto applied = Migrator::Apply(*db_);
    ASSERT_TRUE(applied.ok()) << applied.status();
    TenantRepository tenants(*db_);
    ASSERT_TRUE(tenants.CreateTenant("alice", false).ok());
    ASSERT_TRUE(tenants.CreateTenant("bob", false).ok());
  }

  gantry::testing::TestDatabase test_db_;
  std::unique_ptr<Database> db_;
};

}  // namespace gantry::storage

#endif  // GANTRY_TESTS_STORAGE_STORAGE_FIXTURE_H_
