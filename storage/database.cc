#include "storage/database.h"

#include <pqxx/pqxx>
#include <utility>

#include "absl/strings/str_cat.h"
#include "storage/transaction.h"

namespace gantry::storage {

struct PooledConnection {
  std::unique_ptr<pqxx::connection> conn;  // null until first use and after it broke
};

namespace {

constexpr int kMaxAttempts = 5;

// SQLSTATE classes that mean the session is gone: 08 connection exception, 57P admin shutdown etc.
bool IsConnectionState(const std::string& sqlstate) {
  return sqlstate.rfind("08", 0) == 0 || sqlstate.rfind("57P", 0) == 0;
}

}  // namespace

Database::Database(std::string dsn, int pool_size) : dsn_(std::move(dsn)), pool_size_(pool_size) {
  for (int i = 0; i < pool_size_; ++i) idle_.push_back(std::make_unique<PooledConnection>());
}

Database::~Database() = default;

absl::StatusOr<std::unique_ptr<Database>> Database::Create(const std::string& dsn, int pool_size) {
  if (pool_size < 1) return absl::InvalidArgumentError("database pool size must be at least 1");
  std::unique_ptr<Database> db(new Database(dsn, pool_size));
  absl::Status ping = db->Ping();
  if (!ping.ok()) {
    return absl::Status(ping.code(),
                        absl::StrCat("cannot use the database (--db): ", ping.message()));
  }
  return db;
}

std::unique_ptr<PooledConnection> Database::Acquire() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](std::vector<std::unique_ptr<PooledConnection>>* idle) { return !idle->empty(); },
      &idle_));
  std::unique_ptr<PooledConnection> conn = std::move(idle_.back());
  idle_.pop_back();
  ++in_use_;
  return conn;
}

void Database::Release(std::unique_ptr<PooledConnection> conn) {
  absl::MutexLock lock(&mu_);
  idle_.push_back(std::move(conn));
  --in_use_;
}

absl::Status Database::Transact(const std::function<absl::Status(Transaction&)>& fn) {
  absl::Status status;
  bool reconnected = false;
  for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
    std::unique_ptr<PooledConnection> pc = Acquire();
    bool broken = false;
    bool retry = false;
    try {
      if (pc->conn == nullptr || !pc->conn->is_open()) {
        pc->conn.reset();
        pc->conn = std::make_unique<pqxx::connection>(dsn_);
      }
      pqxx::work work(*pc->conn);
      Transaction tx(work);
      status = fn(tx);
      if (status.ok()) work.commit();
    } catch (const pqxx::broken_connection& e) {
      broken = true;
      status = absl::UnavailableError(absl::StrCat("database unavailable: ", e.what()));
    } catch (const pqxx::in_doubt_error& e) {
      broken = true;
      status = absl::UnavailableError(
          absl::StrCat("database connection lost during commit; outcome unknown: ", e.what()));
      reconnected = true;  // never retry: the first attempt may have committed
    } catch (const pqxx::serialization_failure& e) {
      retry = true;
      status = absl::AbortedError(absl::StrCat("transaction conflict, retry: ", e.what()));
    } catch (const pqxx::deadlock_detected& e) {
      retry = true;
      status = absl::AbortedError(absl::StrCat("transaction deadlock, retry: ", e.what()));
    } catch (const pqxx::unique_violation& e) {
      status = absl::AlreadyExistsError(absl::StrCat("already exists: ", e.what()));
    } catch (const pqxx::foreign_key_violation& e) {
      status = absl::FailedPreconditionError(
          absl::StrCat("refers to something that does not exist: ", e.what()));
    } catch (const pqxx::sql_error& e) {
      if (IsConnectionState(e.sqlstate())) {
        broken = true;
        status = absl::UnavailableError(absl::StrCat("database unavailable: ", e.what()));
      } else {
        status = absl::InternalError(absl::StrCat("database error: ", e.what()));
      }
    } catch (const std::exception& e) {
      if (pc->conn != nullptr && !pc->conn->is_open()) {
        broken = true;
        status = absl::UnavailableError(absl::StrCat("database unavailable: ", e.what()));
      } else {
        status = absl::InternalError(absl::StrCat("database error: ", e.what()));
      }
    }
    if (broken) pc->conn.reset();
    Release(std::move(pc));
    if (broken && !reconnected) {
      reconnected = true;
      continue;
    }
    if (retry) continue;
    return status;
  }
  return status;
}

absl::Status Database::Ping() {
  return Transact([](Transaction& tx) {
    tx.work().exec("SELECT 1");
    return absl::OkStatus();
  });
}

}  // namespace gantry::storage
