#include "tests/support/test_database.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <pqxx/pqxx>
#include <random>

#include "absl/strings/str_cat.h"

namespace gantry::testing {

namespace {

constexpr char kUnset[] =
    "GANTRY_TEST_DSN is not set: run deploy/local/test, which starts a private PostgreSQL";

[[noreturn]] void Die(const std::string& msg) {
  std::fprintf(stderr, "\n*** gantry tests: %s\n\n", msg.c_str());
  std::fflush(stderr);
  std::abort();
}

std::string RandomSuffix() {
  std::random_device rd;
  std::mt19937_64 rng((static_cast<uint64_t>(rd()) << 32) ^ rd());
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::string s;
  for (int i = 0; i < 16; ++i) s += kChars[rng() % 36];
  return s;
}

}  // namespace

std::string TestDatabase::AdminDsnFromEnv() {
  const char* dsn = std::getenv("GANTRY_TEST_DSN");
  if (dsn == nullptr || *dsn == '\0') Die(kUnset);
  return dsn;
}

std::string TestDatabase::WithDatabase(const std::string& dsn, const std::string& dbname) {
  if (dsn.rfind("postgresql://", 0) == 0 || dsn.rfind("postgres://", 0) == 0) {
    // URI: scheme://[userinfo@]host[:port][/dbname][?params]
    const size_t authority = dsn.find("//") + 2;
    const size_t query = dsn.find('?', authority);
    const size_t slash = dsn.find('/', authority);
    const size_t end = query == std::string::npos ? dsn.size() : query;
    const size_t path = (slash == std::string::npos || slash > end) ? end : slash;
    return dsn.substr(0, path) + "/" + dbname + dsn.substr(end);
  }
  // key=value form: drop any dbname=... pair and append ours.
  std::string out;
  size_t i = 0;
  while (i < dsn.size()) {
    while (i < dsn.size() && dsn[i] == ' ') ++i;
    if (i >= dsn.size()) break;
    size_t start = i;
    bool quoted = false;
    while (i < dsn.size() && (quoted || dsn[i] != ' ')) {
      if (dsn[i] == '\'') quoted = !quoted;
      if (dsn[i] == '\\') ++i;
      ++i;
    }
    std::string pair = dsn.substr(start, i - start);
    if (pair.rfind("dbname=", 0) == 0 || pair.rfind("dbname =", 0) == 0) continue;
    absl::StrAppend(&out, out.empty() ? "" : " ", pair);
  }
  absl::StrAppend(&out, out.empty() ? "" : " ", "dbname=", dbname);
  return out;
}

TestDatabase::TestDatabase() : admin_dsn_(AdminDsnFromEnv()), name_("test_" + RandomSuffix()) {
  try {
    pqxx::connection conn(admin_dsn_);
    pqxx::nontransaction tx(conn);
    tx.exec("CREATE DATABASE " + tx.quote_name(name_));
  } catch (const std::exception& e) {
    Die(absl::StrCat("cannot create a test database through GANTRY_TEST_DSN=\"", admin_dsn_, "\": ",
                     e.what(), " (run deploy/local/test, which starts a private PostgreSQL)"));
  }
  dsn_ = WithDatabase(admin_dsn_, name_);
}

TestDatabase::~TestDatabase() {
  try {
    pqxx::connection conn(admin_dsn_);
    pqxx::nontransaction tx(conn);
    tx.exec("DROP DATABASE IF EXISTS " + tx.quote_name(name_) + " WITH (FORCE)");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gantry tests: could not drop test database %s: %s\n", name_.c_str(),
                 e.what());
  }
}

namespace {
std::string RunQuery(const std::string& dsn, const std::string& sql) {
  std::string out;
  try {
    pqxx::connection conn(dsn);
    pqxx::nontransaction tx(conn);
    pqxx::result r = tx.exec(sql);
    for (const pqxx::row& row : r) {
      for (pqxx::row::size_type i = 0; i < row.size(); ++i) {
        absl::StrAppend(&out, i > 0 ? "\t" : "", row[i].is_null() ? "NULL" : row[i].c_str());
      }
      out += "\n";
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << "test query failed: " << sql << ": " << e.what();
  }
  return out;
}
}  // namespace

std::string TestDatabase::Query(const std::string& sql) const { return RunQuery(dsn_, sql); }

std::string TestDatabase::AdminQuery(const std::string& sql) const {
  return RunQuery(admin_dsn_, sql);
}

}  // namespace gantry::testing
