// TokenRepository: tenant API tokens and worker join tokens, stored only as SHA-256 hex digests.
#ifndef GANTRY_STORAGE_TOKEN_REPOSITORY_H_
#define GANTRY_STORAGE_TOKEN_REPOSITORY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "storage/database.h"

namespace gantry::storage {

// The tenant a valid API token speaks for (the server turns it into a server::Principal).
struct TokenTenant {
  std::string tenant;
  bool admin = false;
};

// A freshly issued token: the secret is returned once and never stored in clear.
struct IssuedToken {
  std::string token_id;  // public handle for revocation: "tok-<uuid>" (API) or "jtk-<uuid>" (join)
  std::string secret;    // "gnt_<64 hex>" (API) or "gjt_<64 hex>" (join), 32 bytes from RAND_bytes
};

// Thread-safe (stateless over a Database, which must outlive it).
class TokenRepository {
 public:
  explicit TokenRepository(Database& db) : db_(db) {}

  // Issues an API token for an existing tenant (NOT_FOUND otherwise).
  absl::StatusOr<IssuedToken> CreateToken(const std::string& tenant,
                                          const std::string& description);
  // Stores a given secret as an API token of `tenant` (bootstrap from --admin-token-file).
  // Idempotent: importing the same secret for the same tenant again returns the existing token_id
  // (and un-revokes nothing: a revoked token stays revoked). ALREADY_EXISTS when the secret belongs
  // to another tenant; NOT_FOUND when the tenant does not exist; INVALID_ARGUMENT for an empty
  // secret.
  absl::StatusOr<std::string> ImportToken(const std::string& tenant, const std::string& secret,
                                          const std::string& description);
  // UNAUTHENTICATED when the secret is unknown or revoked.
  absl::StatusOr<TokenTenant> Authenticate(const std::string& secret);
  // Revokes an API token ("tok-...") or a join token ("jtk-..."). NOT_FOUND when unknown. Revoking
  // twice is OK.
  absl::Status RevokeToken(const std::string& token_id);

  // Worker join tokens (not tied to a tenant).
  absl::StatusOr<IssuedToken> CreateJoinToken(const std::string& description);
  // Idempotent; returns the token_id. INVALID_ARGUMENT for an empty secret.
  absl::StatusOr<std::string> ImportJoinToken(const std::string& secret,
                                              const std::string& description = "imported");
  // OK when the secret is a known, unrevoked join token; UNAUTHENTICATED otherwise.
  absl::Status IsValidJoinToken(const std::string& secret);

  // Lower-case hex SHA-256 of `secret` (what the tables store).
  static std::string HashSecret(const std::string& secret);

 private:
  Database& db_;
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_TOKEN_REPOSITORY_H_
