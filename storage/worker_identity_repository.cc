#include "storage/worker_identity_repository.h"

#include "absl/strings/str_cat.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "storage/sql_util.h"
#include "storage/transaction.h"

namespace gantry::storage {

absl::StatusOr<std::string> WorkerIdentityRepository::AuthenticateJoinToken(
    const std::string& secret) {
  const absl::Status denied = absl::UnauthenticatedError(
      "the join token is unknown or revoked; ask an admin to issue one "
      "(AdminService.CreateJoinToken)");
  if (secret.empty()) return denied;
  std::string id;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec("join_token_id",
                             "SELECT id FROM join_tokens WHERE sha256 = $1 AND revoked_at IS NULL",
                             Sha256Hex(secret));
    if (!r.empty()) id = r[0][0].as<std::string>();
    return absl::OkStatus();
  }));
  if (id.empty()) return denied;
  return id;
}

absl::StatusOr<std::vector<gantry::v1::JoinTokenInfo>> WorkerIdentityRepository::ListJoinTokens() {
  std::vector<gantry::v1::JoinTokenInfo> tokens;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec(
        "join_token_list",
        "SELECT t.id, t.description, gantry_us(t.created_at), gantry_us(t.revoked_at), "
        "(SELECT count(*) FROM workers w WHERE w.join_token_id = t.id "
        "AND w.credential_sha256 IS NOT NULL) FROM join_tokens t ORDER BY t.created_at, t.id");
    for (const pqxx::row& row : r) {
      gantry::v1::JoinTokenInfo& t = tokens.emplace_back();
      t.set_token_id(row[0].as<std::string>());
      t.set_description(row[1].as<std::string>());
      sql::SetTimestamp(row[2], t.mutable_created_at());
      if (!row[3].is_null()) sql::SetTimestamp(row[3], t.mutable_revoked_at());
      t.set_workers(row[4].as<int>());
    }
    return absl::OkStatus();
  }));
  return tokens;
}

absl::StatusOr<std::vector<std::string>> WorkerIdentityRepository::RevokeJoinToken(
    const std::string& token_id) {
  std::vector<std::string> workers;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    workers.clear();
    pqxx::result r =
        tx.Exec("join_token_revoke_cascade",
                "UPDATE join_tokens SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1 "
                "RETURNING id",
                token_id);
    if (r.empty()) {
      return absl::NotFoundError(absl::StrCat("join token ", token_id,
                                              " does not exist; list them with "
                                              "`gantry admin join-tokens list`"));
    }
    pqxx::result w = tx.Exec("worker_credentials_revoke",
                             "UPDATE workers SET credential_sha256 = NULL WHERE join_token_id = $1 "
                             "AND credential_sha256 IS NOT NULL RETURNING id",
                             token_id);
    for (const pqxx::row& row : w) workers.push_back(row[0].as<std::string>());
    return absl::OkStatus();
  }));
  return workers;
}

absl::StatusOr<std::optional<WorkerIdentity>> WorkerIdentityRepository::FindByName(
    const std::string& name) {
  std::optional<WorkerIdentity> found;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec("worker_identity_by_name",
                             "SELECT id, credential_sha256, connected, gantry_us(last_heartbeat) "
                             "FROM workers WHERE name = $1",
                             name);
    if (r.empty()) return absl::OkStatus();
    WorkerIdentity w;
    w.worker_id = r[0][0].as<std::string>();
    if (!r[0][1].is_null()) w.credential_sha256 = r[0][1].as<std::string>();
    w.connected = r[0][2].as<bool>();
    w.last_heartbeat = absl::FromUnixMicros(r[0][3].as<int64_t>());
    found = std::move(w);
    return absl::OkStatus();
  }));
  return found;
}

absl::Status WorkerIdentityRepository::SetCredential(const std::string& worker_id,
                                                     const std::string& credential_sha256,
                                                     const std::string& join_token_id) {
  return db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec(
        "worker_set_credential",
        "UPDATE workers SET credential_sha256 = $2, join_token_id = $3 WHERE id = $1 RETURNING id",
        worker_id, credential_sha256, join_token_id);
    if (r.empty()) {
      return absl::NotFoundError(absl::StrCat("worker ", worker_id, " is not registered"));
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::string> WorkerIdentityRepository::AuthenticateWorker(
    const std::string& secret) {
  std::string id;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r =
        tx.Exec("worker_by_credential", "SELECT id FROM workers WHERE credential_sha256 = $1",
                Sha256Hex(secret));
    if (!r.empty()) id = r[0][0].as<std::string>();
    return absl::OkStatus();
  }));
  if (id.empty()) {
    return absl::UnauthenticatedError(
        "the worker credential is unknown, replaced or revoked; register the worker again with "
        "a valid join token");
  }
  return id;
}

absl::Status WorkerIdentityRepository::RecordPlacement(
    const std::string& job_id, int attempt, const std::vector<std::string>& rank_workers) {
  return db_.Transact([&](Transaction& tx) -> absl::Status {
    for (size_t rank = 0; rank < rank_workers.size(); ++rank) {
      tx.Exec("job_placement_record",
              "INSERT INTO job_placements (job_id, attempt, rank, worker_id) "
              "VALUES ($1, $2, $3, $4) ON CONFLICT (job_id, attempt, rank) "
              "DO UPDATE SET worker_id = EXCLUDED.worker_id",
              job_id, attempt, static_cast<int>(rank), rank_workers[rank]);
    }
    return absl::OkStatus();
  });
}

absl::StatusOr<std::map<std::pair<int, int>, std::string>> WorkerIdentityRepository::PlacementOf(
    const std::string& job_id) {
  std::map<std::pair<int, int>, std::string> ranks;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    ranks.clear();
    pqxx::result r =
        tx.Exec("job_placement_of",
                "SELECT attempt, rank, worker_id FROM job_placements WHERE job_id = $1", job_id);
    for (const pqxx::row& row : r) {
      ranks[{row[0].as<int>(), row[1].as<int>()}] = row[2].as<std::string>();
    }
    return absl::OkStatus();
  }));
  return ranks;
}

namespace {

// Placements of job $1's current attempt $2 on worker $3 ('' = any worker) while the job is
// placing, running, restarting or cancelling it: what a live attempt on a worker means.
constexpr absl::string_view kLiveAttemptOn =
    "SELECT 1 FROM jobs j JOIN job_placements p ON p.job_id = j.id AND p.attempt = j.attempt "
    "WHERE j.id = $1 AND j.attempt = $2 AND ($3 = '' OR p.worker_id = $3) AND j.state IN "
    "('JOB_STATE_PLACING', 'JOB_STATE_RUNNING', 'JOB_STATE_RESTARTING', 'JOB_STATE_CANCELLING')";

}  // namespace

absl::StatusOr<bool> WorkerIdentityRepository::HoldsLiveAttempt(const std::string& job_id,
                                                                int attempt,
                                                                const std::string& worker_id) {
  bool found = false;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec("job_live_attempt_on", absl::StrCat(kLiveAttemptOn, " LIMIT 1"),
                             job_id, attempt, worker_id);
    found = !r.empty();
    return absl::OkStatus();
  }));
  return found;
}

absl::StatusOr<WorkerIdentityRepository::RankAttempt> WorkerIdentityRepository::CheckRankAttempt(
    const std::string& job_id, int attempt, const std::string& worker_id) {
  RankAttempt out;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec("rank_attempt_check",
                             absl::StrCat("SELECT EXISTS (", kLiveAttemptOn,
                                          "), EXISTS (SELECT 1 FROM workers w WHERE "
                                          "w.id = $3 AND w.credential_sha256 IS NOT NULL)"),
                             job_id, attempt, worker_id);
    out.live = r[0][0].as<bool>();
    out.worker_standing = r[0][1].as<bool>();
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<bool> WorkerIdentityRepository::MayFetchCheckpoint(const std::string& sha256,
                                                                  const std::string& worker_id,
                                                                  const std::string& job_id) {
  bool allowed = false;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec(
        "checkpoint_fetch_allowed",
        "SELECT 1 FROM models WHERE $3 = '' AND checkpoint_sha256 = $1 "
        "UNION ALL SELECT 1 FROM job_checkpoints c WHERE c.sha256 = $1 AND ("
        "  ($3 <> '' AND c.job_id = $3) OR ($3 = '' AND EXISTS (SELECT 1 FROM job_placements p "
        "  WHERE p.job_id = c.job_id AND p.worker_id = $2))) LIMIT 1",
        sha256, worker_id, job_id);
    allowed = !r.empty();
    return absl::OkStatus();
  }));
  return allowed;
}

}  // namespace gantry::storage
