// WorkerIdentityRepository: who a worker is: its credential (stored only as a SHA-256 hex digest)
// and the join token that issued it, the join tokens themselves (list, revoke), and which workers
// each job attempt's ranks were placed on.
#ifndef GANTRY_STORAGE_WORKER_IDENTITY_REPOSITORY_H_
#define GANTRY_STORAGE_WORKER_IDENTITY_REPOSITORY_H_

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gantry/v1/admin.pb.h"
#include "storage/database.h"

namespace gantry::storage {

// What the database holds about a registered worker's identity and liveness.
struct WorkerIdentity {
  std::string worker_id;
  std::string credential_sha256;  // empty: none issued, or revoked
  bool connected = false;
  absl::Time last_heartbeat = absl::InfinitePast();
};

// Thread-safe (stateless over a Database, which must outlive it). Every method answers
// UNAVAILABLE when the database cannot be reached.
class WorkerIdentityRepository {
 public:
  explicit WorkerIdentityRepository(Database& db) : db_(db) {}

  // The join token id ("jtk-...") of a known, unrevoked join token secret; UNAUTHENTICATED
  // otherwise.
  absl::StatusOr<std::string> AuthenticateJoinToken(const std::string& secret);
  // Join tokens, oldest first, with the number of workers whose current credential each issued.
  absl::StatusOr<std::vector<gantry::v1::JoinTokenInfo>> ListJoinTokens();
  // Revokes a join token and the credentials of every worker it issued, in one transaction;
  // returns those workers' ids. NOT_FOUND for an unknown id; revoking twice is OK (and revokes
  // nothing more).
  absl::StatusOr<std::vector<std::string>> RevokeJoinToken(const std::string& token_id);

  // The identity of the worker named `name`; nullopt when none is registered.
  absl::StatusOr<std::optional<WorkerIdentity>> FindByName(const std::string& name);
  // Stores the hash of a worker's new credential and the join token that issued it.
  absl::Status SetCredential(const std::string& worker_id, const std::string& credential_sha256,
                             const std::string& join_token_id);
  // The worker id a credential secret belongs to; UNAUTHENTICATED when unknown or revoked.
  absl::StatusOr<std::string> AuthenticateWorker(const std::string& secret);

  // Records that rank r of `attempt` of `job_id` runs on rank_workers[r] (idempotent).
  absl::Status RecordPlacement(const std::string& job_id, int attempt,
                               const std::vector<std::string>& rank_workers);
  // (attempt, rank) -> worker id of every recorded attempt of the job (empty when none was).
  absl::StatusOr<std::map<std::pair<int, int>, std::string>> PlacementOf(const std::string& job_id);
  // Whether `attempt` is the job's current attempt, the job is placing, running, restarting or
  // cancelling it (not queued, not ended), and one of its ranks is on `worker_id` (on any worker
  // when `worker_id` is empty): what a worker or rank may upload checkpoints and report for.
  absl::StatusOr<bool> HoldsLiveAttempt(const std::string& job_id, int attempt,
                                        const std::string& worker_id);
  // What a rank credential of (job, attempt, worker) needs, in one query: that attempt live on the
  // worker as HoldsLiveAttempt says, and the worker's credential standing (not revoked: a revoked
  // worker's rank credentials die with its credential, in the database, across restarts).
  struct RankAttempt {
    bool live = false;
    bool worker_standing = false;
  };
  absl::StatusOr<RankAttempt> CheckRankAttempt(const std::string& job_id, int attempt,
                                               const std::string& worker_id);
  // Whether checkpoint blob `sha256` may be read. By a rank of `job_id` (when set): only when it is
  // a checkpoint that job uploaded (the job's starting model the caller checks itself). By worker
  // `worker_id` (job_id empty): a registered model version's checkpoint (any worker may be asked to
  // serve any model) or a checkpoint of any job with ranks on that worker.
  absl::StatusOr<bool> MayFetchCheckpoint(const std::string& sha256, const std::string& worker_id,
                                          const std::string& job_id);

 private:
  Database& db_;
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_WORKER_IDENTITY_REPOSITORY_H_
