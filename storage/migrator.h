// Migrator: applies the versioned SQL schema migrations embedded in the binary.
#ifndef GANTRY_STORAGE_MIGRATOR_H_
#define GANTRY_STORAGE_MIGRATOR_H_

#include "absl/status/statusor.h"
#include "storage/database.h"

namespace gantry::storage {

// Migrations are numbered 1..LatestVersion() and recorded in table
// schema_version(version, description, applied_at).
class Migrator {
 public:
  // Applies every migration newer than the database's version, all in ONE transaction under
  // pg_advisory_xact_lock (so concurrent servers serialise). Returns how many were applied (0 when
  // the schema is current). A database whose schema is newer than this binary knows is refused with
  // FAILED_PRECONDITION "database schema version N is newer than this gantry-server (max M);
  // upgrade the server".
  static absl::StatusOr<int> Apply(Database& db);

  // The schema version recorded in the database (0 for an empty database).
  static absl::StatusOr<int> CurrentVersion(Database& db);

  // The newest migration this binary carries.
  static int LatestVersion();
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_MIGRATOR_H_
