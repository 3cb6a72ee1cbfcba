// WebSessionRepository: browser sessions of the HTTP API, opened with a tenant API token and stored
// only as SHA-256 hex digests of their secrets.
#ifndef GANTRY_STORAGE_WEB_SESSION_REPOSITORY_H_
#define GANTRY_STORAGE_WEB_SESSION_REPOSITORY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "storage/database.h"
#include "storage/token_repository.h"

namespace gantry::storage {

// A freshly opened session: the secret goes into the browser's cookie once and is never stored.
struct OpenedSession {
  std::string secret;  // "gws_<64 hex>", 32 bytes from RAND_bytes
  TokenTenant tenant;
  absl::Time expires_at;
};

// Thread-safe (stateless over a Database, which must outlive it). A session belongs to the API
// token it was opened with: it is valid while it is neither expired nor logged out and that
// token is not revoked, so revoking the token ends every session opened with it.
class WebSessionRepository {
 public:
  explicit WebSessionRepository(Database& db) : db_(db) {}

  // Opens a session for the tenant of `token_secret` that lasts `ttl`. UNAUTHENTICATED when the
  // token is unknown or revoked. Also deletes sessions that ended more than a day ago.
  absl::StatusOr<OpenedSession> Open(const std::string& token_secret, absl::Duration ttl);
  // The tenant of a live session; UNAUTHENTICATED when the secret is unknown, expired, logged out
  // or its token was revoked.
  absl::StatusOr<TokenTenant> Authenticate(const std::string& session_secret);
  // Ends a session (logout). Ending an unknown or ended session is OK.
  absl::Status Close(const std::string& session_secret);

  // Whether `secret` has the form of a session secret (not whether it is valid).
  static bool IsSessionSecret(const std::string& secret);

 private:
  Database& db_;
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_WEB_SESSION_REPOSITORY_H_
