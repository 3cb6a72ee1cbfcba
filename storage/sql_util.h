// SQL helpers shared by the repositories (storage-internal): ids, timestamps, JSON, page tokens.
#ifndef GANTRY_STORAGE_SQL_UTIL_H_
#define GANTRY_STORAGE_SQL_UTIL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/message_lite.h"
#include "google/protobuf/timestamp.pb.h"

namespace gantry::storage::sql {

// "<prefix>-<uuid v4>" from OpenSSL's CSPRNG.
std::string NewId(const std::string& prefix);
// `n` random bytes as lower-case hex.
std::string RandomHex(int n);

// Microseconds since the epoch (as produced by SQL gantry_us(timestamptz)) to a Timestamp.
google::protobuf::Timestamp TimestampFromMicros(int64_t micros);
// Sets *ts from a gantry_us(...) column; leaves it untouched when NULL (check is_null() first when
// the field must stay unset: taking mutable_x() already sets it).
void SetTimestamp(const pqxx::field& f, google::protobuf::Timestamp* ts);

// A JSON object {"k":"v",...} / array ["a",...] with proper escaping (passed as a ::jsonb
// parameter).
std::string JsonObject(const std::map<std::string, std::string>& m);
std::string JsonArray(const std::vector<std::string>& v);
// A JSON number or null.
std::string JsonNumber(const std::optional<double>& v);

// Serialises a message for a bytea parameter.
pqxx::binarystring Bytes(const google::protobuf::MessageLite& m);
// Parses a bytea column into `m`; INTERNAL when it does not parse.
absl::Status ParseBytes(const pqxx::field& f, google::protobuf::MessageLite* m);

// Applies the page_size rules of page.h: 0 -> default, > max -> max, < 0 -> INVALID_ARGUMENT.
absl::StatusOr<int> PageSize(int page_size);

// Opaque page tokens carrying a list of keyset values (base64url of "kind|v1|v2...").
std::string EncodePageToken(const std::string& kind, const std::vector<std::string>& values);
// INVALID_ARGUMENT unless `token` was made by EncodePageToken(kind, <n values>).
absl::StatusOr<std::vector<std::string>> DecodePageToken(const std::string& kind,
                                                         const std::string& token, size_t n);

}  // namespace gantry::storage::sql

#endif  // GANTRY_STORAGE_SQL_UTIL_H_
