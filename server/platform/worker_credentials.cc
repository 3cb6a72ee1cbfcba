#include "server/platform/worker_credentials.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/sha256.h"
#include "base/status_macros.h"

namespace gantry::server {
namespace {

constexpr absl::string_view kWorkerPrefix = "gwc_";
constexpr absl::string_view kRankPrefix = "grk_";

std::string RankMessage(const std::string& job_id, int attempt, const std::string& worker_id) {
  return absl::StrCat("gantry rank credential\n", job_id, "\n", attempt, "\n", worker_id);
}

absl::Status BadRankCredential() {
  return absl::UnauthenticatedError(
      "the rank credential is malformed, forged or revoked; a rank uses the credential of its "
      "assignment");
}

}  // namespace

bool WorkerCredentials::IsWorkerSecret(const std::string& secret) {
  return absl::StartsWith(secret, kWorkerPrefix) || absl::StartsWith(secret, kRankPrefix);
}

std::string WorkerCredentials::NewWorkerSecret() {
  return absl::StrCat(kWorkerPrefix, RandomSecretHex(32));
}

absl::StatusOr<Principal> WorkerCredentials::VerifyJoinToken(const std::string& secret) {
  const std::string key = Sha256Hex(secret);
  absl::StatusOr<std::string> id = identities_.AuthenticateJoinToken(secret);
  absl::MutexLock lock(&mu_);
  if (absl::IsUnauthenticated(id.status())) {
    join_tokens_.erase(key);
    return absl::UnauthenticatedError(
        "WorkerService.Register needs a valid worker join token (gantry-worker "
        "--join-token-file); the token is unknown or revoked");
  }
  if (absl::IsUnavailable(id.status())) {
    auto known = join_tokens_.find(key);
    if (known == join_tokens_.end()) return id.status();
    id = known->second;
  }
  RETURN_IF_ERROR(id.status());
  join_tokens_[key] = *id;
  Principal p;
  p.worker = true;
  p.join_token_id = *id;
  return p;
}

absl::StatusOr<Principal> WorkerCredentials::VerifyWorkerSecret(const std::string& secret) {
  Principal p;
  p.worker = true;
  if (absl::StartsWith(secret, kRankPrefix)) {
    // grk_<job>:<attempt>:<worker>:<hmac hex>
    std::vector<std::string> parts =
        absl::StrSplit(absl::string_view(secret).substr(kRankPrefix.size()), ':');
    int attempt = -1;
    if (parts.size() != 4 || parts[0].empty() || parts[2].empty() ||
        !absl::SimpleAtoi(parts[1], &attempt) || attempt < 0) {
      return BadRankCredential();
    }
    const std::string mac = HmacSha256Hex(rank_key_, RankMessage(parts[0], attempt, parts[2]));
    if (!SecretsEqual(mac, parts[3])) return BadRankCredential();
    if (IsRevoked(parts[2])) return BadRankCredential();
    // A rank credential lives as long as its attempt, and its worker's credential, for every call
    // it makes (a revocation made before this process started is in the database).
    ASSIGN_OR_RETURN(storage::WorkerIdentityRepository::RankAttempt held,
                     identities_.CheckRankAttempt(parts[0], attempt, parts[2]));
    if (!held.worker_standing) return BadRankCredential();
    if (!held.live) {
      return absl::UnauthenticatedError(absl::StrCat(
          "the rank credential of job ", parts[0], " attempt ", attempt,
          " has expired: that attempt no longer runs on its worker (it ended, restarted or "
          "moved); a rank of a later attempt uses the credential of its own assignment"));
    }
    p.worker_id = parts[2];
    p.rank_job = parts[0];
    p.rank_attempt = attempt;
    return p;
  }
  if (!absl::StartsWith(secret, kWorkerPrefix)) {
    return absl::UnauthenticatedError("not a worker credential");
  }
  const std::string key = Sha256Hex(secret);
  absl::StatusOr<std::string> id = identities_.AuthenticateWorker(secret);
  absl::MutexLock lock(&mu_);
  if (absl::IsUnauthenticated(id.status())) {
    workers_.erase(key);
    return id.status();
  }
  if (absl::IsUnavailable(id.status())) {
    auto known = workers_.find(key);
    if (known == workers_.end()) return id.status();
    id = known->second;
  }
  RETURN_IF_ERROR(id.status());
  if (revoked_.contains(*id)) {
    return absl::UnauthenticatedError(
        "the worker credential was revoked; register the worker again with a valid join token");
  }
  workers_[key] = *id;
  p.worker_id = *id;
  return p;
}

absl::Status WorkerCredentials::Store(const std::string& worker_id, const std::string& secret,
                                      const std::string& join_token_id) {
  const std::string key = Sha256Hex(secret);
  RETURN_IF_ERROR(identities_.SetCredential(worker_id, key, join_token_id));
  absl::MutexLock lock(&mu_);
  // The worker's earlier credential no longer works, even from memory.
  for (auto it = workers_.begin(); it != workers_.end();) {
    if (it->second == worker_id) {
      workers_.erase(it++);
    } else {
      ++it;
    }
  }
  workers_[key] = worker_id;
  revoked_.erase(worker_id);
  return absl::OkStatus();
}

std::string WorkerCredentials::RankCredential(const std::string& job_id, int attempt,
                                              const std::string& worker_id) const {
  return absl::StrCat(kRankPrefix, job_id, ":", attempt, ":", worker_id, ":",
                      HmacSha256Hex(rank_key_, RankMessage(job_id, attempt, worker_id)));
}

std::string WorkerCredentials::RendezvousSecret(const std::string& job_id, int attempt) const {
  return HmacSha256Hex(rank_key_, absl::StrCat("gantry rendezvous\n", job_id, "\n", attempt));
}

void WorkerCredentials::Revoke(const std::string& join_token_id,
                               const std::vector<std::string>& worker_ids) {
  absl::MutexLock lock(&mu_);
  for (auto it = join_tokens_.begin(); it != join_tokens_.end();) {
    if (it->second == join_token_id) {
      join_tokens_.erase(it++);
    } else {
      ++it;
    }
  }
  for (const std::string& id : worker_ids) {
    revoked_.insert(id);
    for (auto it = workers_.begin(); it != workers_.end();) {
      if (it->second == id) {
        workers_.erase(it++);
      } else {
        ++it;
      }
    }
  }
}

bool WorkerCredentials::IsRevoked(const std::string& worker_id) const {
  absl::MutexLock lock(&mu_);
  return revoked_.contains(worker_id);
}

}  // namespace gantry::server
