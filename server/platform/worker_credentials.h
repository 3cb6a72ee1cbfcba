// WorkerCredentials: issues and checks the secrets workers speak with: the pool's join tokens
// (Register only), each worker's own credential ("gwc_", random, stored hashed) and the rank
// credentials ("grk_", an HMAC over job, attempt and worker under the server's key, which lives in
// a file outside the database; valid while that attempt is the job's live one on that worker).
#ifndef GANTRY_SERVER_PLATFORM_WORKER_CREDENTIALS_H_
#define GANTRY_SERVER_PLATFORM_WORKER_CREDENTIALS_H_

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "server/platform/auth.h"
#include "storage/worker_identity_repository.h"

namespace gantry::server {

// Thread-safe. `identities` must outlive it. Secrets this process verified are remembered (by
// hash) so that workers keep working while the database is unavailable; a revocation made
// through this process takes effect at once (Revoke), one made elsewhere when the database is
// next asked.
class WorkerCredentials {
 public:
  WorkerCredentials(storage::WorkerIdentityRepository& identities, std::string rank_key)
      : identities_(identities), rank_key_(std::move(rank_key)) {}

  // A join token: a Principal with join_token_id. UNAUTHENTICATED when unknown or revoked.
  absl::StatusOr<Principal> VerifyJoinToken(const std::string& secret);
  // Whether a bearer secret has the shape of a worker or rank credential.
  static bool IsWorkerSecret(const std::string& secret);
  // A worker credential (Principal with worker_id) or a rank credential (with worker_id, rank_job
  // and rank_attempt). UNAUTHENTICATED when unknown, forged, replaced or revoked, and for a rank
  // credential whose attempt is no longer the job's live attempt on its worker (ended, restarted
  // or moved: storage::WorkerIdentityRepository::HoldsLiveAttempt); UNAVAILABLE when the database
  // cannot tell.
  absl::StatusOr<Principal> VerifyWorkerSecret(const std::string& secret);

  // A fresh worker credential secret ("gwc_" + 64 hex of 32 random bytes); not stored yet.
  static std::string NewWorkerSecret();
  // Stores `secret` as the credential of `worker_id` (issued by `join_token_id`); the worker's
  // earlier credential stops working and a revocation of the worker is lifted.
  absl::Status Store(const std::string& worker_id, const std::string& secret,
                     const std::string& join_token_id);
  // The credential of one rank process: job `job_id`, `attempt`, placed on `worker_id`.
  std::string RankCredential(const std::string& job_id, int attempt,
                             const std::string& worker_id) const;

  // The secret the ranks of job `job_id`'s attempt `attempt` share for their rendezvous
  // (Assignment.rendezvous_secret): 64 hex, an HMAC under the rank key, so it needs no storage,
  // is the same after a restart and differs for every attempt.
  std::string RendezvousSecret(const std::string& job_id, int attempt) const;

  // Join token `join_token_id` and the credentials of these workers (which it registered) were
  // revoked; their rank credentials stop working too, and nothing of them is accepted from memory.
  void Revoke(const std::string& join_token_id, const std::vector<std::string>& worker_ids);
  bool IsRevoked(const std::string& worker_id) const;

 private:
  storage::WorkerIdentityRepository& identities_;
  const std::string rank_key_;
  mutable absl::Mutex mu_;
  // sha256 of a secret -> join token id / worker id, as last verified by the database.
  absl::flat_hash_map<std::string, std::string> join_tokens_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::string> workers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> revoked_ ABSL_GUARDED_BY(mu_);  // worker ids
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_PLATFORM_WORKER_CREDENTIALS_H_
