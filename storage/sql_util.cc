#include "storage/sql_util.h"

#include <openssl/rand.h>

#include <cmath>
#include <cstdio>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "base/json_string.h"
#include "base/log.h"

namespace gantry::storage::sql {

namespace {

std::string Hex(const unsigned char* data, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 0xf];
  }
  return out;
}

void RandomBytes(unsigned char* buf, int n) {
  // RAND_bytes only fails when the CSPRNG cannot be seeded; running on without randomness would
  // hand out guessable secrets, so this is fatal.
  if (RAND_bytes(buf, n) != 1) {
    GANTRY_LOG(ERROR) << "OpenSSL RAND_bytes failed; cannot generate secrets";
    std::abort();
  }
}

}  // namespace

std::string NewId(const std::string& prefix) {
  unsigned char b[16];
  RandomBytes(b, sizeof(b));
  b[6] = (b[6] & 0x0f) | 0x40;  // version 4
  b[8] = (b[8] & 0x3f) | 0x80;  // variant 10
  std::string h = Hex(b, sizeof(b));
  return absl::StrCat(prefix, "-", h.substr(0, 8), "-", h.substr(8, 4), "-", h.substr(12, 4), "-",
                      h.substr(16, 4), "-", h.substr(20, 12));
}

std::string RandomHex(int n) {
  std::string buf(n, '\0');
  RandomBytes(reinterpret_cast<unsigned char*>(buf.data()), n);
  return Hex(reinterpret_cast<const unsigned char*>(buf.data()), buf.size());
}

google::protobuf::Timestamp TimestampFromMicros(int64_t micros) {
  google::protobuf::Timestamp ts;
  int64_t seconds = micros / 1000000;
  int64_t rest = micros % 1000000;
  if (rest < 0) {
    rest += 1000000;
    --seconds;
  }
  ts.set_seconds(seconds);
  ts.set_nanos(static_cast<int32_t>(rest * 1000));
  return ts;
}

void SetTimestamp(const pqxx::field& f, google::protobuf::Timestamp* ts) {
  if (f.is_null()) return;
  *ts = TimestampFromMicros(f.as<int64_t>());
}

std::string JsonObject(const std::map<std::string, std::string>& m) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : m) {
    if (!first) out += ",";
    first = false;
    absl::StrAppend(&out, JsonString(k), ":", JsonString(v));
  }
  return out + "}";
}

std::string JsonArray(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i > 0) out += ",";
    out += JsonString(v[i]);
  }
  return out + "]";
}

std::string JsonNumber(const std::optional<double>& v) {
  if (!v.has_value() || !std::isfinite(*v)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.17g", *v);
  return buf;
}

pqxx::binarystring Bytes(const google::protobuf::MessageLite& m) {
  return pqxx::binarystring(m.SerializeAsString());
}

absl::Status ParseBytes(const pqxx::field& f, google::protobuf::MessageLite* m) {
  if (f.is_null()) {
    m->Clear();
    return absl::OkStatus();
  }
  pqxx::binarystring b(f);
  if (!m->ParseFromArray(b.data(), static_cast<int>(b.size()))) {
    return absl::InternalError(absl::StrCat("stored ", m->GetTypeName(), " does not parse"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> PageSize(int page_size) {
  if (page_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("page_size must be 0 (default ", 50, ") to 1000, got ", page_size));
  }
  if (page_size == 0) return 50;
  return page_size > 1000 ? 1000 : page_size;
}

std::string EncodePageToken(const std::string& kind, const std::vector<std::string>& values) {
  std::string raw = kind;
  for (const std::string& v : values) absl::StrAppend(&raw, "|", absl::WebSafeBase64Escape(v));
  return absl::WebSafeBase64Escape(raw);
}

absl::StatusOr<std::vector<std::string>> DecodePageToken(const std::string& kind,
                                                         const std::string& token, size_t n) {
  const absl::Status bad = absl::InvalidArgumentError(
      "page_token is not one this listing returned; pass next_page_token unchanged, or empty for "
      "the "
      "first page");
  std::string raw;
  if (!absl::WebSafeBase64Unescape(token, &raw)) return bad;
  std::vector<std::string> parts = absl::StrSplit(raw, '|');
  if (parts.size() != n + 1 || parts[0] != kind) return bad;
  std::vector<std::string> values;
  for (size_t i = 1; i < parts.size(); ++i) {
    std::string v;
    if (!absl::WebSafeBase64Unescape(parts[i], &v)) return bad;
    values.push_back(std::move(v));
  }
  return values;
}

}  // namespace gantry::storage::sql
