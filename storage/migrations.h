// Migration: one versioned step of the embedded SQL schema (storage-internal).
#ifndef GANTRY_STORAGE_MIGRATIONS_H_
#define GANTRY_STORAGE_MIGRATIONS_H_

#include <vector>

#include "absl/status/status.h"
#include "storage/transaction.h"

namespace gantry::storage {

struct Migration {
  int version;              // 1, 2, ... without gaps
  const char* description;  // one line, recorded in schema_version
  const char* sql;          // executed as one script inside the migration transaction
  // Optional: runs after `sql` in the same transaction, for data SQL cannot reach (values inside
  // stored protobuf records). An error rolls the whole migration back.
  absl::Status (*backfill)(Transaction& tx) = nullptr;
};

// Every migration this binary knows, in increasing version order.
const std::vector<Migration>& EmbeddedMigrations();

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_MIGRATIONS_H_
