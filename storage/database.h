// Database: a small thread-safe pool of PostgreSQL connections and the only way storage/ runs SQL.
#ifndef GANTRY_STORAGE_DATABASE_H_
#define GANTRY_STORAGE_DATABASE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace gantry::storage {

class Transaction;
struct PooledConnection;

// How a Database connects: pool size, and how long connecting or one statement may take before
// the call gives up with UNAVAILABLE (so a database that is down or hung never blocks a thread
// for long). A DSN that sets connect_timeout itself keeps its own.
struct DatabaseOptions {
  int pool_size = 8;
  absl::Duration connect_timeout = absl::Seconds(5);     // rounded up to whole seconds, >= 2 s
  absl::Duration statement_timeout = absl::Seconds(10);  // 0 = none
  // How long Transact waits for a free pooled connection before UNAVAILABLE; <= 0 = forever.
  absl::Duration pool_wait = absl::Seconds(10);
};

// Thread-safe. Holds up to `pool_size` libpqxx connections, opened lazily and replaced when broken.
// Every pqxx exception is caught here and turned into an absl::Status:
//   broken connection / cannot connect  -> UNAVAILABLE (after one retry on a fresh connection)
//   statement timeout                   -> UNAVAILABLE
//   serialization failure / deadlock    -> retried (up to 5 attempts), then ABORTED
//   unique violation                    -> ALREADY_EXISTS
//   anything else                       -> INTERNAL
class Database {
 public:
  // Connects once to check the DSN (UNAVAILABLE when the server cannot be reached, INVALID_ARGUMENT
  // for a malformed DSN). pool_size must be >= 1.
  static absl::StatusOr<std::unique_ptr<Database>> Create(const std::string& dsn,
                                                          int pool_size = 8);
  static absl::StatusOr<std::unique_ptr<Database>> Create(const std::string& dsn,
                                                          const DatabaseOptions& options);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs `fn` in a READ COMMITTED transaction on a pooled connection and commits when it returns OK
  // (rolls back otherwise and returns its status). `fn` may run more than once (retries), so it
  // must reset whatever it captures on entry. Waits up to options.pool_wait for a free
  // connection, then returns UNAVAILABLE ("database busy") without running `fn`.
  absl::Status Transact(const std::function<absl::Status(Transaction&)>& fn);

  // Runs `SELECT 1`; OK when the database answers.
  absl::Status Ping();

  // How many Transact calls made on the calling thread so far ended UNAVAILABLE. A caller that
  // runs code which swallows errors (logs and goes on) compares it before and after to learn
  // whether the database was unreachable meanwhile.
  static int64_t UnavailableOnThisThread();

  const std::string& dsn() const { return dsn_; }
  int pool_size() const { return pool_size_; }

  // The pool's use so far (the server's /metrics gauges and counters).
  struct PoolStats {
    int size = 0;
    int in_use = 0;
    int waiting = 0;          // callers waiting for a free connection now
    int64_t acquired = 0;     // connections handed out
    int64_t timeouts = 0;     // waits that gave up after pool_wait (UNAVAILABLE)
    double wait_seconds = 0;  // summed time callers waited for a connection
  };
  PoolStats Stats() const;

 private:
  Database(std::string dsn, const DatabaseOptions& options);
  std::unique_ptr<PooledConnection> Acquire();
  void Release(std::unique_ptr<PooledConnection> conn);

  const std::string dsn_;
  const int pool_size_;
  const std::string connect_dsn_;       // dsn_ with the connect timeout
  const int64_t statement_timeout_ms_;  // 0 = none
  const absl::Duration pool_wait_;      // <= 0 = forever
  mutable absl::Mutex mu_;
  // Idle connections (possibly not yet opened); `in_use_` counts the ones handed out. Acquire
  // returns null when none became free within pool_wait_.
  std::vector<std::unique_ptr<PooledConnection>> idle_ ABSL_GUARDED_BY(mu_);
  int in_use_ ABSL_GUARDED_BY(mu_) = 0;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t acquired_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t timeouts_ ABSL_GUARDED_BY(mu_) = 0;
  double wait_seconds_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_DATABASE_H_
