#include "storage/database.h"

#include <algorithm>
#include <pqxx/pqxx>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "storage/transaction.h"

namespace gantry::storage {

struct PooledConnection {
  std::unique_ptr<pqxx::connection> conn;  // null until first use and after it broke
};

namespace {

constexpr int kMaxAttempts = 5;

thread_local int64_t unavailable_on_thread = 0;

// `dsn` with connect_timeout added unless it has one (key=value and URI forms).
std::string WithConnectTimeout(const std::string& dsn, absl::Duration timeout) {
  if (dsn.find("connect_timeout") != std::string::npos || timeout <= absl::ZeroDuration()) {
    return dsn;
  }
  const int64_t seconds =
      std::max<int64_t>(2, absl::ToInt64Seconds(absl::Ceil(timeout, absl::Seconds(1))));
  const bool uri = dsn.rfind("postgresql://", 0) == 0 || dsn.rfind("postgres://", 0) == 0;
  if (!uri) return absl::StrCat(dsn, dsn.empty() ? "" : " ", "connect_timeout=", seconds);
  return absl::StrCat(dsn, dsn.find('?') == std::string::npos ? "?" : "&",
                      "connect_timeout=", seconds);
}

// SQLSTATE classes that mean the session is gone: 08 connection exception, 57P admin shutdown etc.
bool IsConnectionState(const std::string& sqlstate) {
  return sqlstate.rfind("08", 0) == 0 || sqlstate.rfind("57P", 0) == 0;
}

}  // namespace

Database::Database(std::string dsn, const DatabaseOptions& options)
    : dsn_(std::move(dsn)),
      pool_size_(options.pool_size),
      connect_dsn_(WithConnectTimeout(dsn_, options.connect_timeout)),
      statement_timeout_ms_(
          std::max<int64_t>(0, absl::ToInt64Milliseconds(options.statement_timeout))),
      pool_wait_(options.pool_wait) {
  for (int i = 0; i < pool_size_; ++i) idle_.push_back(std::make_unique<PooledConnection>());
}

Database::~Database() = default;

absl::StatusOr<std::unique_ptr<Database>> Database::Create(const std::string& dsn, int pool_size) {
  DatabaseOptions options;
  options.pool_size = pool_size;
  return Create(dsn, options);
}

int64_t Database::UnavailableOnThisThread() { return unavailable_on_thread; }

absl::StatusOr<std::unique_ptr<Database>> Database::Create(const std::string& dsn,
                                                           const DatabaseOptions& options) {
  if (options.pool_size < 1) {
    return absl::InvalidArgumentError("database pool size must be at least 1");
  }
  std::unique_ptr<Database> db(new Database(dsn, options));
  absl::Status ping = db->Ping();
  if (!ping.ok()) {
    return absl::Status(ping.code(),
                        absl::StrCat("cannot use the database (--db): ", ping.message()));
  }
  return db;
}

std::unique_ptr<PooledConnection> Database::Acquire() {
  absl::MutexLock lock(&mu_);
  const absl::Condition free_connection(
      +[](std::vector<std::unique_ptr<PooledConnection>>* idle) { return !idle->empty(); }, &idle_);
  const absl::Time start = absl::Now();
  ++waiting_;
  bool got = true;
  if (pool_wait_ > absl::ZeroDuration()) {
    got = mu_.AwaitWithTimeout(free_connection, pool_wait_);
  } else {
    mu_.Await(free_connection);
  }
  --waiting_;
  wait_seconds_ += absl::ToDoubleSeconds(absl::Now() - start);
  if (!got) {
    ++timeouts_;
    return nullptr;
  }
  std::unique_ptr<PooledConnection> conn = std::move(idle_.back());
  idle_.pop_back();
  ++in_use_;
  ++acquired_;
  return conn;
}

Database::PoolStats Database::Stats() const {
  absl::MutexLock lock(&mu_);
  PoolStats stats;
  stats.size = pool_size_;
  stats.in_use = in_use_;
  stats.waiting = waiting_;
  stats.acquired = acquired_;
  stats.timeouts = timeouts_;
  stats.wait_seconds = wait_seconds_;
  return stats;
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
    if (pc == nullptr) {
      ++unavailable_on_thread;
      return absl::UnavailableError(absl::StrCat("database busy: no free connection within ",
                                                 absl::FormatDuration(pool_wait_), " (all ",
                                                 pool_size_, " in use); try again later"));
    }
    bool broken = false;
    bool retry = false;
    try {
      if (pc->conn == nullptr || !pc->conn->is_open()) {
        pc->conn.reset();
        pc->conn = std::make_unique<pqxx::connection>(connect_dsn_);
        if (statement_timeout_ms_ > 0) {
          pqxx::nontransaction session(*pc->conn);
          session.exec(absl::StrCat("SET statement_timeout = ", statement_timeout_ms_));
        }
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
      if (e.sqlstate() == "57014") {  // query_canceled: the statement timeout
        status = absl::UnavailableError(
            absl::StrCat("database unavailable: no answer within the statement timeout (",
                         statement_timeout_ms_, " ms): ", e.what()));
      } else if (IsConnectionState(e.sqlstate())) {
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
    if (absl::IsUnavailable(status)) ++unavailable_on_thread;
    return status;
  }
  if (absl::IsUnavailable(status)) ++unavailable_on_thread;
  return status;
}

absl::Status Database::Ping() {
  return Transact([](Transaction& tx) {
    tx.work().exec("SELECT 1");
    return absl::OkStatus();
  });
}

}  // namespace gantry::storage
