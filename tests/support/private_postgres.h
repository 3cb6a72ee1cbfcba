// PrivatePostgres: a PostgreSQL server of one test's own (deploy/local/pg.sh with GANTRY_PG_DIR in
// a fresh temporary folder, listening only on a unix socket inside it), which the test may stop and
// start again to simulate a database outage without disturbing the shared test server
// (GANTRY_TEST_DSN) that other tests use at the same time.
#ifndef GANTRY_TESTS_SUPPORT_PRIVATE_POSTGRES_H_
#define GANTRY_TESTS_SUPPORT_PRIVATE_POSTGRES_H_

#include <string>

namespace gantry::testing {

// Not thread-safe. Running as root, initdb and the server run as $GANTRY_PG_USER (postgres), as
// pg.sh does; the folder is made reachable for that user.
class PrivatePostgres {
 public:
  // initdb + start + createdb; a failure is a test failure (ADD_FAILURE) and leaves dsn() empty.
  PrivatePostgres();
  // Stops the server and removes its folder.
  ~PrivatePostgres();
  PrivatePostgres(const PrivatePostgres&) = delete;
  PrivatePostgres& operator=(const PrivatePostgres&) = delete;

  // The libpq DSN of its database ("host=<dir>/run port=5432 dbname=gantry user=...").
  const std::string& dsn() const { return dsn_; }
  const std::string& dir() const { return dir_; }

  // `pg_ctl stop -m fast`: open sessions are ended, new connections fail until Start().
  bool Stop();
  // Starts the stopped server again (same data).
  bool Start();

 private:
  // Runs pg.sh `command`; true on exit code 0 (stdout in *out), else ADD_FAILURE with its output.
  bool RunScript(const std::string& command, std::string* out);

  std::string dir_;
  std::string dsn_;
};

}  // namespace gantry::testing

#endif  // GANTRY_TESTS_SUPPORT_PRIVATE_POSTGRES_H_
