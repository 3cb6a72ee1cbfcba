// Database: a small thread-safe pool of PostgreSQL connections and the only way storage/ runs SQL.
#ifndef GANTRY_STORAGE_DATABASE_H_
#define GANTRY_STORAGE_DATABASE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace gantry::storage {

class Transaction;
struct PooledConnection;

// Thread-safe. Holds up to `pool_size` libpqxx connections, opened lazily and replaced when broken.
// Every pqxx exception is caught here and turned into an absl::Status:
//   broken connection / cannot connect  -> UNAVAILABLE (after one retry on a fresh connection)
//   serialization failure / deadlock    -> retried (up to 5 attempts), then ABORTED
//   unique violation                    -> ALREADY_EXISTS
//   anything else                       -> INTERNAL
class Database {
 public:
  // Connects once to check the DSN (UNAVAILABLE when the server cannot be reached, INVALID_ARGUMENT
  // for a malformed DSN). pool_size must be >= 1.
  static absl::StatusOr<std::unique_ptr<Database>> Create(const std::string& dsn,
                                                          int pool_size = 8);
  ~Database();
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Runs `fn` in a READ COMMITTED transaction on a pooled connection and commits when it returns OK
  // (rolls back otherwise and returns its status). `fn` may run more than once (retries), so it
  // must reset whatever it captures on entry. Blocks while all connections are in use.
  absl::Status Transact(const std::function<absl::Status(Transaction&)>& fn);

  // Runs `SELECT 1`; OK when the database answers.
  absl::Status Ping();

  const std::string& dsn() const { return dsn_; }
  int pool_size() const { return pool_size_; }

 private:
  Database(std::string dsn, int pool_size);
  std::unique_ptr<PooledConnection> Acquire();
  void Release(std::unique_ptr<PooledConnection> conn);

  const std::string dsn_;
  const int pool_size_;
  absl::Mutex mu_;
  // Idle connections (possibly not yet opened); `in_use_` counts the ones handed out.
  std::vector<std::unique_ptr<PooledConnection>> idle_ ABSL_GUARDED_BY(mu_);
  int in_use_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_DATABASE_H_
