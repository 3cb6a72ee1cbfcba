#include "storage/migrator.h"

#include "absl/strings/str_cat.h"
#include "storage/migrations.h"
#include "storage/transaction.h"

namespace gantry::storage {

namespace {

// Arbitrary constant naming gantry's migration lock in pg_advisory_xact_lock.
constexpr int64_t kMigrationLockKey = 0x67616e7472790001;  // "gantry" 1

// Reads the recorded version; 0 when the table does not exist yet.
int ReadVersion(Transaction& tx) {
  pqxx::result exists =
      tx.Exec("migrator_exists", "SELECT to_regclass('schema_version') IS NOT NULL");
  if (!exists[0][0].as<bool>()) return 0;
  pqxx::result r =
      tx.Exec("migrator_version", "SELECT COALESCE(MAX(version), 0) FROM schema_version");
  return r[0][0].as<int>();
}

}  // namespace

int Migrator::LatestVersion() { return EmbeddedMigrations().back().version; }

absl::StatusOr<int> Migrator::CurrentVersion(Database& db) {
  int version = 0;
  absl::Status status = db.Transact([&](Transaction& tx) {
    version = ReadVersion(tx);
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return version;
}

absl::StatusOr<int> Migrator::Apply(Database& db) {
  int applied = 0;
  absl::Status status = db.Transact([&](Transaction& tx) -> absl::Status {
    applied = 0;
    tx.Exec("migrator_lock", "SELECT pg_advisory_xact_lock($1)", kMigrationLockKey);
    tx.work().exec(
        "CREATE TABLE IF NOT EXISTS schema_version ("
        " version integer PRIMARY KEY,"
        " description text NOT NULL,"
        " applied_at timestamptz NOT NULL DEFAULT now())");
    const int current = ReadVersion(tx);
    const int latest = LatestVersion();
    if (current > latest) {
      return absl::FailedPreconditionError(absl::StrCat("database schema version ", current,
                                                        " is newer than this gantry-server (max ",
                                                        latest, "); upgrade the server"));
    }
    for (const Migration& m : EmbeddedMigrations()) {
      if (m.version <= current) continue;
      tx.work().exec(m.sql);
      if (m.backfill != nullptr) {
        absl::Status filled = m.backfill(tx);
        if (!filled.ok()) {
          return absl::Status(filled.code(), absl::StrCat("migration ", m.version, " (",
                                                          m.description, "): ", filled.message()));
        }
      }
      tx.Exec("migrator_record",
              "INSERT INTO schema_version (version, description) VALUES ($1, $2)", m.version,
              m.description);
      ++applied;
    }
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return applied;
}

}  // namespace gantry::storage
