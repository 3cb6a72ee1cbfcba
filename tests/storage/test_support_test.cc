// Tests of tests/support itself: DSN rewriting, fail-loudly without GANTRY_TEST_DSN, temp dirs.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"
#include "tests/support/test_database.h"

namespace gantry::testing {
namespace {

TEST(TestSupportTest, WithDatabaseRewritesKeyValueAndUriDsns) {
  EXPECT_EQ(TestDatabase::WithDatabase("host=/tmp/run port=5432 dbname=gantry user=postgres", "t1"),
            "host=/tmp/run port=5432 user=postgres dbname=t1");
  EXPECT_EQ(TestDatabase::WithDatabase("host=/tmp/run user=postgres", "t1"),
            "host=/tmp/run user=postgres dbname=t1");
  EXPECT_EQ(TestDatabase::WithDatabase("host=h password='a b' dbname=x", "t1"),
            "host=h password='a b' dbname=t1");
  EXPECT_EQ(
      TestDatabase::WithDatabase("postgresql://u@localhost:5432/gantry?sslmode=disable", "t1"),
      "postgresql://u@localhost:5432/t1?sslmode=disable");
  EXPECT_EQ(TestDatabase::WithDatabase("postgresql://u@localhost", "t1"),
            "postgresql://u@localhost/t1");
}

TEST(TestSupportTest, CreatesAndDropsAUniqueDatabase) {
  std::string name;
  {
    TestDatabase a;
    TestDatabase b;
    EXPECT_NE(a.name(), b.name());
    EXPECT_EQ(a.Query("SELECT current_database()"), a.name() + "\n");
    name = a.name();
    EXPECT_EQ(b.AdminQuery("SELECT count(*) FROM pg_database WHERE datname = '" + name + "'"),
              "1\n");
  }
  TestDatabase c;
  EXPECT_EQ(c.AdminQuery("SELECT count(*) FROM pg_database WHERE datname = '" + name + "'"), "0\n");
}

TEST(TestSupportDeathTest, MissingDsnFailsLoudly) {
  ::testing::FLAGS_gtest_death_test_style = "threadsafe";
  EXPECT_DEATH(
      {
        unsetenv("GANTRY_TEST_DSN");
        TestDatabase db;
      },
      "GANTRY_TEST_DSN is not set: run deploy/local/test, which starts a private PostgreSQL");
}

TEST(TestSupportTest, TempDirIsPrivateAndRemoved) {
  std::string path;
  {
    TempDir a;
    TempDir b;
    EXPECT_NE(a.path(), b.path());
    path = a.path();
    std::ofstream(a.File("x")) << "data";
    std::filesystem::create_directories(a.File("sub/dir"));
    EXPECT_TRUE(std::filesystem::exists(a.File("x")));
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace gantry::testing
