// TestDatabase: a freshly created, uniquely named PostgreSQL database for one test, dropped
// afterwards.
#ifndef GANTRY_TESTS_SUPPORT_TEST_DATABASE_H_
#define GANTRY_TESTS_SUPPORT_TEST_DATABASE_H_

#include <string>

namespace gantry::testing {

// Connects to the server named by env GANTRY_TEST_DSN (a libpq key=value DSN or a postgresql://
// URI), runs CREATE DATABASE test_<random> and exposes a DSN for it. The destructor drops it (WITH
// FORCE, so open connections do not block). When GANTRY_TEST_DSN is unset or the server cannot be
// reached the process aborts with a message saying to run deploy/local/test: tests never skip. Not
// thread-safe; create one per test (or per suite) on the test's thread.
class TestDatabase {
 public:
  TestDatabase();
  ~TestDatabase();
  TestDatabase(const TestDatabase&) = delete;
  TestDatabase& operator=(const TestDatabase&) = delete;

  // DSN of the fresh database (the admin DSN with dbname replaced).
  const std::string& dsn() const { return dsn_; }
  const std::string& name() const { return name_; }
  // The DSN of GANTRY_TEST_DSN itself (the maintenance database).
  const std::string& admin_dsn() const { return admin_dsn_; }

  // Runs one SQL statement (no parameters) against the fresh database, for test set-up and
  // assertions on raw tables. Aborts the test with ADD_FAILURE on error and returns the rows as
  // tab-separated lines.
  std::string Query(const std::string& sql) const;
  // The same through admin_dsn() (the maintenance database), e.g. to terminate sessions or ALTER
  // DATABASE ... ALLOW_CONNECTIONS to simulate an outage.
  std::string AdminQuery(const std::string& sql) const;

  // Reads GANTRY_TEST_DSN or aborts with the explanation.
  static std::string AdminDsnFromEnv();
  // `dsn` with its database name replaced by `dbname`.
  static std::string WithDatabase(const std::string& dsn, const std::string& dbname);

 private:
  std::string admin_dsn_;
  std::string name_;
  std::string dsn_;
};

}  // namespace gantry::testing

#endif  // GANTRY_TESTS_SUPPORT_TEST_DATABASE_H_
