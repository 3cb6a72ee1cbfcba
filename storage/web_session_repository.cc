#include "storage/web_session_repository.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "storage/sql_util.h"
#include "storage/transaction.h"

namespace gantry::storage {
namespace {

constexpr absl::string_view kSessionPrefix = "gws_";

absl::Status SessionDenied() {
  return absl::UnauthenticatedError(
      "no valid session: it expired, was logged out, or its token was revoked; log in again");
}

}  // namespace

bool WebSessionRepository::IsSessionSecret(const std::string& secret) {
  return absl::StartsWith(secret, kSessionPrefix);
}

absl::StatusOr<OpenedSession> WebSessionRepository::Open(const std::string& token_secret,
                                                         absl::Duration ttl) {
  const absl::Status denied = absl::UnauthenticatedError(
      "the token is unknown or revoked; log in with a valid tenant token (an admin creates one "
      "with AdminService.CreateToken)");
  if (token_secret.empty() || IsSessionSecret(token_secret)) return denied;
  OpenedSession session;
  session.secret = absl::StrCat(kSessionPrefix, RandomSecretHex(32));
  bool found = false;
  int64_t expires_us = 0;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    tx.Exec("web_session_expire",
            "DELETE FROM web_sessions WHERE expires_at < now() - interval '1 day' "
            "OR closed_at < now() - interval '1 day'");
    pqxx::result k = tx.Exec("web_session_token",
                             "SELECT k.id, t.name, t.admin FROM api_tokens k JOIN tenants t "
                             "ON t.name = k.tenant WHERE k.sha256 = $1 AND k.revoked_at IS NULL",
                             Sha256Hex(token_secret));
    found = !k.empty();
    if (!found) return absl::OkStatus();
    session.tenant.tenant = k[0][1].as<std::string>();
    session.tenant.admin = k[0][2].as<bool>();
    pqxx::result r = tx.Exec("web_session_open",
                             "INSERT INTO web_sessions (sha256, token_id, expires_at) "
                             "VALUES ($1, $2, now() + $3 * interval '1 microsecond') "
                             "RETURNING gantry_us(expires_at)",
                             Sha256Hex(session.secret), k[0][0].as<std::string>(),
                             absl::ToInt64Microseconds(ttl));
    expires_us = r[0][0].as<int64_t>();
    return absl::OkStatus();
  }));
  if (!found) return denied;
  session.expires_at = absl::FromUnixMicros(expires_us);
  return session;
}

absl::StatusOr<TokenTenant> WebSessionRepository::Authenticate(const std::string& session_secret) {
  if (!IsSessionSecret(session_secret)) return SessionDenied();
  TokenTenant principal;
  bool found = false;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r =
        tx.Exec("web_session_authenticate",
                "SELECT t.name, t.admin FROM web_sessions s JOIN api_tokens k ON k.id = s.token_id "
                "JOIN tenants t ON t.name = k.tenant WHERE s.sha256 = $1 AND s.closed_at IS NULL "
                "AND s.expires_at > now() AND k.revoked_at IS NULL",
                Sha256Hex(session_secret));
    found = !r.empty();
    if (found) {
      principal.tenant = r[0][0].as<std::string>();
      principal.admin = r[0][1].as<bool>();
    }
    return absl::OkStatus();
  }));
  if (!found) return SessionDenied();
  return principal;
}

absl::Status WebSessionRepository::Close(const std::string& session_secret) {
  if (!IsSessionSecret(session_secret)) return absl::OkStatus();
  return db_.Transact([&](Transaction& tx) -> absl::Status {
    tx.Exec("web_session_close",
            "UPDATE web_sessions SET closed_at = COALESCE(closed_at, now()) WHERE sha256 = $1",
            Sha256Hex(session_secret));
    return absl::OkStatus();
  });
}

}  // namespace gantry::storage
