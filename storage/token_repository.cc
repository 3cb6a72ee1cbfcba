#include "storage/token_repository.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "storage/sql_util.h"
#include "storage/transaction.h"

namespace gantry::storage {

std::string TokenRepository::HashSecret(const std::string& secret) {
  return gantry::Sha256Hex(secret);
}

absl::StatusOr<IssuedToken> TokenRepository::CreateToken(const std::string& tenant,
                                                         const std::string& description) {
  IssuedToken token;
  token.token_id = sql::NewId("tok");
  token.secret = "gnt_" + sql::RandomHex(32);
  const std::string hash = HashSecret(token.secret);
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec("token_create",
                             "INSERT INTO api_tokens (id, sha256, tenant, description) "
                             "SELECT $1, $2, name, $4 FROM tenants WHERE name = $3 RETURNING id",
                             token.token_id, hash, tenant, description);
    if (r.empty()) {
      return absl::NotFoundError(absl::StrCat("tenant \"", tenant, "\" does not exist"));
    }
    return absl::OkStatus();
  }));
  return token;
}

absl::StatusOr<std::string> TokenRepository::ImportToken(const std::string& tenant,
                                                         const std::string& secret,
                                                         const std::string& description) {
  if (secret.empty()) return absl::InvalidArgumentError("the token to import is empty");
  const std::string hash = HashSecret(secret);
  std::string id;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result t =
        tx.Exec("token_tenant_exists", "SELECT 1 FROM tenants WHERE name = $1", tenant);
    if (t.empty())
      return absl::NotFoundError(absl::StrCat("tenant \"", tenant, "\" does not exist"));
    tx.Exec("token_import",
            "INSERT INTO api_tokens (id, sha256, tenant, description) VALUES ($1, $2, $3, $4) "
            "ON CONFLICT (sha256) DO NOTHING",
            sql::NewId("tok"), hash, tenant, description);
    pqxx::result r =
        tx.Exec("token_by_hash", "SELECT id, tenant FROM api_tokens WHERE sha256 = $1", hash);
    if (r.empty()) return absl::InternalError("imported token vanished");
    if (r[0][1].as<std::string>() != tenant) {
      return absl::AlreadyExistsError(
          "this token is already registered for another tenant; use a different secret");
    }
    id = r[0][0].as<std::string>();
    return absl::OkStatus();
  }));
  return id;
}

absl::StatusOr<TokenTenant> TokenRepository::Authenticate(const std::string& secret) {
  const absl::Status denied = absl::UnauthenticatedError(
      "the token is unknown or revoked; pass a valid token as 'authorization: Bearer <token>'");
  if (secret.empty()) return denied;
  const std::string hash = HashSecret(secret);
  TokenTenant principal;
  bool found = false;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec("token_authenticate",
                             "SELECT t.name, t.admin FROM api_tokens k JOIN tenants t "
                             "ON t.name = k.tenant WHERE k.sha256 = $1 AND k.revoked_at IS NULL",
                             hash);
    found = !r.empty();
    if (found) {
      principal.tenant = r[0][0].as<std::string>();
      principal.admin = r[0][1].as<bool>();
    }
    return absl::OkStatus();
  }));
  if (!found) return denied;
  return principal;
}

absl::Status TokenRepository::RevokeToken(const std::string& token_id) {
  return db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r;
    if (absl::StartsWith(token_id, "jtk-")) {
      r = tx.Exec("join_token_revoke",
                  "UPDATE join_tokens SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1 "
                  "RETURNING id",
                  token_id);
    } else {
      r = tx.Exec("token_revoke",
                  "UPDATE api_tokens SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1 "
                  "RETURNING id",
                  token_id);
    }
    if (r.empty()) return absl::NotFoundError(absl::StrCat("token ", token_id, " does not exist"));
    return absl::OkStatus();
  });
}

absl::StatusOr<IssuedToken> TokenRepository::CreateJoinToken(const std::string& description) {
  IssuedToken token;
  token.token_id = sql::NewId("jtk");
  token.secret = "gjt_" + sql::RandomHex(32);
  const std::string hash = HashSecret(token.secret);
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    tx.Exec("join_token_create",
            "INSERT INTO join_tokens (id, sha256, description) VALUES ($1, $2, $3)", token.token_id,
            hash, description);
    return absl::OkStatus();
  }));
  return token;
}

absl::StatusOr<std::string> TokenRepository::ImportJoinToken(const std::string& secret,
                                                             const std::string& description) {
  if (secret.empty()) return absl::InvalidArgumentError("the join token to import is empty");
  const std::string hash = HashSecret(secret);
  std::string id;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    tx.Exec("join_token_import",
            "INSERT INTO join_tokens (id, sha256, description) VALUES ($1, $2, $3) "
            "ON CONFLICT (sha256) DO NOTHING",
            sql::NewId("jtk"), hash, description);
    pqxx::result r =
        tx.Exec("join_token_by_hash", "SELECT id FROM join_tokens WHERE sha256 = $1", hash);
    if (r.empty()) return absl::InternalError("imported join token vanished");
    id = r[0][0].as<std::string>();
    return absl::OkStatus();
  }));
  return id;
}

absl::Status TokenRepository::IsValidJoinToken(const std::string& secret) {
  const absl::Status denied = absl::UnauthenticatedError(
      "the join token is unknown or revoked; ask an admin to issue one "
      "(AdminService.CreateJoinToken)");
  if (secret.empty()) return denied;
  const std::string hash = HashSecret(secret);
  bool valid = false;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r =
        tx.Exec("join_token_valid",
                "SELECT 1 FROM join_tokens WHERE sha256 = $1 AND revoked_at IS NULL", hash);
    valid = !r.empty();
    return absl::OkStatus();
  }));
  return valid ? absl::OkStatus() : denied;
}

}  // namespace gantry::storage
