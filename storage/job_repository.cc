#include "storage/job_repository.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/json_string.h"
#include "base/status_macros.h"
#include "storage/sql_util.h"
#include "storage/transaction.h"

namespace gantry::storage {

namespace {

using gantry::v1::Job;
using gantry::v1::JobEvent;
using gantry::v1::JobState;

#define JOB_COLUMNS                                                                              \
  "id, owner, spec, state, reason, message, gantry_us(created_at), gantry_us(updated_at), "      \
  "gantry_us(started_at), gantry_us(finished_at), progress, restarts, model_ref, seq, attempt, " \
  "latest_checkpoint"

absl::StatusOr<Job> JobFromRow(const pqxx::row& row) {
  Job job;
  job.set_id(row[0].as<std::string>());
  job.set_owner(row[1].as<std::string>());
  RETURN_IF_ERROR(sql::ParseBytes(row[2], job.mutable_spec()));
  JobState state;
  if (!gantry::v1::JobState_Parse(row[3].as<std::string>(), &state)) {
    return absl::InternalError(
        absl::StrCat("job ", job.id(), " has unknown state ", row[3].c_str()));
  }
  job.set_state(state);
  job.set_reason(row[4].as<std::string>());
  job.set_message(row[5].as<std::string>());
  sql::SetTimestamp(row[6], job.mutable_created_at());
  sql::SetTimestamp(row[7], job.mutable_updated_at());
  if (!row[8].is_null()) sql::SetTimestamp(row[8], job.mutable_started_at());
  if (!row[9].is_null()) sql::SetTimestamp(row[9], job.mutable_finished_at());
  if (!row[10].is_null()) RETURN_IF_ERROR(sql::ParseBytes(row[10], job.mutable_progress()));
  job.set_restarts(row[11].as<int>());
  job.set_model_ref(row[12].as<std::string>());
  job.set_attempt(row[14].as<int>());
  if (!row[15].is_null())
    RETURN_IF_ERROR(sql::ParseBytes(row[15], job.mutable_latest_checkpoint()));
  return job;
}

// A PostgreSQL text[] literal of enum names (identifiers, no quoting needed).
std::string StateArray(const std::vector<JobState>& states) {
  std::vector<std::string> names;
  for (JobState s : states) names.push_back(gantry::v1::JobState_Name(s));
  return absl::StrCat("{", absl::StrJoin(names, ","), "}");
}

// Appends `event` to job `id` inside `tx`; returns its sequence. Empty result = no such job.
// Ends the job's running attempt in the usage records (CostRepository): its rank lifetime stops
// with the transition that ends it, on the database's clock.
void CloseOpenUsage(Transaction& tx, const std::string& id) {
  tx.Exec("job_usage_close",
          "UPDATE job_usage SET ended_at = greatest(now(), started_at) "
          "WHERE job_id = $1 AND ended_at IS NULL",
          id);
}

pqxx::result InsertEvent(Transaction& tx, const std::string& id, const JobEvent& event) {
  JobEvent stored = event;
  stored.clear_sequence();
  stored.clear_time();
  return tx.Exec("job_event_insert",
                 "WITH s AS (UPDATE jobs SET last_sequence = last_sequence + 1 WHERE id = $1 "
                 "           RETURNING last_sequence) "
                 "INSERT INTO job_events (job_id, sequence, event) "
                 "SELECT $1, last_sequence, $2 FROM s RETURNING sequence",
                 id, sql::Bytes(stored));
}

JobEvent StateChangeEvent(JobState from, JobState to, const std::string& reason,
                          const std::string& message) {
  JobEvent e;
  auto* sc = e.mutable_state_change();
  sc->set_from(from);
  sc->set_to(to);
  sc->set_reason(reason);
  sc->set_message(message);
  return e;
}

absl::Status JobNotFound(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("job ", id, " does not exist"));
}

}  // namespace

bool IsTerminalJobState(JobState s) {
  return s == gantry::v1::JOB_STATE_SUCCEEDED || s == gantry::v1::JOB_STATE_FAILED ||
         s == gantry::v1::JOB_STATE_CANCELLED;
}

absl::StatusOr<Job> JobRepository::Create(const std::string& owner, const gantry::v1::JobSpec& spec,
                                          const std::string& request_id, int64_t max_active_jobs) {
  if (owner.empty()) return absl::InvalidArgumentError("a job needs an owner");
  const std::string message =
      absl::StrCat("waiting for ", std::max(1, spec.world_size()), " free slots");
  std::map<std::string, std::string> labels(spec.labels().begin(), spec.labels().end());
  const char* request = request_id.empty() ? nullptr : request_id.c_str();
  Job job;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    if (max_active_jobs > 0) {
      // Serialises this owner's limited submits (FOR NO KEY UPDATE does not block other inserts
      // that merely reference the tenant).
      tx.Exec("job_quota_lock", "SELECT 1 FROM tenants WHERE name = $1 FOR NO KEY UPDATE", owner);
      if (!request_id.empty()) {
        pqxx::result existing =
            tx.Exec("job_by_request",
                    "SELECT " JOB_COLUMNS " FROM jobs WHERE owner = $1 AND request_id = $2", owner,
                    request_id);
        if (!existing.empty()) {
          ASSIGN_OR_RETURN(job, JobFromRow(existing[0]));
          return absl::OkStatus();
        }
      }
      pqxx::result active = tx.Exec(
          "job_quota_active",
          "SELECT count(*) FROM jobs WHERE owner = $1 AND state IN "
          "('JOB_STATE_QUEUED', 'JOB_STATE_PLACING', 'JOB_STATE_RUNNING', 'JOB_STATE_RESTARTING')",
          owner);
      const int64_t in_use = active[0][0].as<int64_t>();
      if (in_use >= max_active_jobs) {
        return absl::ResourceExhaustedError(absl::StrCat(
            "limit max_concurrent_jobs of tenant \"", owner, "\" is ", max_active_jobs,
            "; in use: ", in_use,
            " jobs QUEUED, PLACING, RUNNING or RESTARTING. Wait for one to end or cancel one, or "
            "ask an admin to raise the limit"));
      }
    }
    pqxx::result r = tx.Exec(
        "job_create",
        "INSERT INTO jobs (id, owner, state, reason, message, spec, labels, priority, dataset, "
        "request_id) VALUES ($1, $2, 'JOB_STATE_QUEUED', 'Submitted', $3, $4, $5::jsonb, $6, $7, "
        "$8) "
        "ON CONFLICT (owner, request_id) DO NOTHING RETURNING " JOB_COLUMNS,
        sql::NewId("job"), owner, message, sql::Bytes(spec), sql::JsonObject(labels),
        spec.priority(), spec.dataset(), request);
    if (r.empty()) {
      // Same owner and request_id: the job an earlier call created.
      pqxx::result existing = tx.Exec(
          "job_by_request", "SELECT " JOB_COLUMNS " FROM jobs WHERE owner = $1 AND request_id = $2",
          owner, request_id);
      if (existing.empty()) return absl::AbortedError("concurrent submit; retry");
      ASSIGN_OR_RETURN(job, JobFromRow(existing[0]));
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(job, JobFromRow(r[0]));
    InsertEvent(tx, job.id(),
                StateChangeEvent(gantry::v1::JOB_STATE_UNSPECIFIED, gantry::v1::JOB_STATE_QUEUED,
                                 "Submitted", message));
    return absl::OkStatus();
  }));
  return job;
}

absl::StatusOr<Job> JobRepository::Get(const std::string& owner, const std::string& id) {
  Job job;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec(
        "job_get", "SELECT " JOB_COLUMNS " FROM jobs WHERE id = $1 AND ($2 = '' OR owner = $2)", id,
        owner);
    if (r.empty()) return JobNotFound(id);
    ASSIGN_OR_RETURN(job, JobFromRow(r[0]));
    return absl::OkStatus();
  }));
  return job;
}

absl::StatusOr<Page<Job>> JobRepository::List(
    const std::string& owner, const std::vector<JobState>& states,
    const std::map<std::string, std::string>& label_selector, int page_size,
    const std::string& page_token) {
  ASSIGN_OR_RETURN(int limit, sql::PageSize(page_size));
  int64_t before = 0;
  if (!page_token.empty()) {
    ASSIGN_OR_RETURN(std::vector<std::string> keys, sql::DecodePageToken("jobs", page_token, 1));
    if (!absl::SimpleAtoi(keys[0], &before) || before <= 0) {
      return absl::InvalidArgumentError("page_token is malformed; pass next_page_token unchanged");
    }
  }
  Page<Job> page;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    page = {};
    pqxx::result r = tx.Exec(
        "job_list",
        "SELECT " JOB_COLUMNS
        " FROM jobs WHERE ($1 = '' OR owner = $1) "
        "AND (cardinality($2::text[]) = 0 OR state = ANY($2::text[])) AND labels @> $3::jsonb "
        "AND ($4::bigint = 0 OR seq < $4) ORDER BY seq DESC LIMIT $5",
        owner, StateArray(states), sql::JsonObject(label_selector), before, limit + 1);
    int64_t last_seq = 0;
    for (size_t i = 0; i < r.size() && static_cast<int>(i) < limit; ++i) {
      ASSIGN_OR_RETURN(Job job, JobFromRow(r[i]));
      page.items.push_back(std::move(job));
      last_seq = r[i][13].as<int64_t>();
    }
    if (static_cast<int>(r.size()) > limit) {
      page.next_page_token = sql::EncodePageToken("jobs", {absl::StrCat(last_seq)});
    }
    return absl::OkStatus();
  }));
  return page;
}

absl::StatusOr<Job> JobRepository::Transition(const std::string& id,
                                              const std::vector<JobState>& allowed_from,
                                              JobState to, const std::string& reason,
                                              const std::string& message) {
  Job job;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result cur = tx.Exec("job_lock", "SELECT state FROM jobs WHERE id = $1 FOR UPDATE", id);
    if (cur.empty()) return JobNotFound(id);
    JobState from = gantry::v1::JOB_STATE_UNSPECIFIED;
    gantry::v1::JobState_Parse(cur[0][0].as<std::string>(), &from);
    if (std::find(allowed_from.begin(), allowed_from.end(), from) == allowed_from.end()) {
      std::vector<std::string> allowed;
      for (JobState s : allowed_from) allowed.push_back(gantry::v1::JobState_Name(s));
      return absl::FailedPreconditionError(
          absl::StrCat("job ", id, " is ", gantry::v1::JobState_Name(from), "; it can become ",
                       gantry::v1::JobState_Name(to), " only from ", absl::StrJoin(allowed, ", ")));
    }
    const std::string to_name = gantry::v1::JobState_Name(to);
    pqxx::result r = tx.Exec(
        "job_transition",
        "UPDATE jobs SET state = $2::text, reason = $3, message = $4, updated_at = now(), "
        "started_at = CASE WHEN $2::text = 'JOB_STATE_RUNNING' AND started_at IS NULL THEN now() "
        "             ELSE started_at END, "
        "finished_at = CASE WHEN $5 THEN now() ELSE finished_at END, "
        "restarts = restarts + CASE WHEN $2::text = 'JOB_STATE_RESTARTING' THEN 1 ELSE 0 END "
        "WHERE id = $1 RETURNING " JOB_COLUMNS,
        id, to_name, reason, message, IsTerminalJobState(to));
    ASSIGN_OR_RETURN(job, JobFromRow(r[0]));
    if (IsTerminalJobState(to)) CloseOpenUsage(tx, id);
    InsertEvent(tx, id, StateChangeEvent(from, to, reason, message));
    return absl::OkStatus();
  }));
  Changed(id);
  return job;
}

absl::StatusOr<Job> JobRepository::BeginRestart(const std::string& id,
                                                const std::vector<JobState>& allowed_from,
                                                const gantry::v1::Restart& restart) {
  Job job;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result cur = tx.Exec("job_lock", "SELECT state FROM jobs WHERE id = $1 FOR UPDATE", id);
    if (cur.empty()) return JobNotFound(id);
    JobState from = gantry::v1::JOB_STATE_UNSPECIFIED;
    gantry::v1::JobState_Parse(cur[0][0].as<std::string>(), &from);
    if (std::find(allowed_from.begin(), allowed_from.end(), from) == allowed_from.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", id, " is ", gantry::v1::JobState_Name(from), "; it cannot restart"));
    }
    // The attempt that ends: its devices and price give the redone work's device-hours and cost.
    gantry::v1::Restart recorded = restart;
    pqxx::result usage = tx.Exec(
        "job_restart_usage",
        "SELECT devices, price_per_device_hour FROM job_usage u JOIN jobs j ON j.id = u.job_id "
        "AND j.attempt = u.attempt WHERE u.job_id = $1",
        id);
    if (!usage.empty()) {
      const double device_hours = restart.redone_seconds() / 3600.0 * usage[0][0].as<int>();
      recorded.set_redone_device_hours(device_hours);
      recorded.set_redone_cost_usd(device_hours * usage[0][1].as<double>());
    }
    CloseOpenUsage(tx, id);
    pqxx::result r =
        tx.Exec("job_restart",
                "UPDATE jobs SET state = 'JOB_STATE_RESTARTING', reason = $2, message = $3, "
                "updated_at = now(), "
                "attempt = attempt + 1, restarts = restarts + CASE WHEN $4 THEN 1 ELSE 0 END "
                "WHERE id = $1 RETURNING " JOB_COLUMNS,
                id, restart.reason(), restart.message(), restart.counted());
    ASSIGN_OR_RETURN(job, JobFromRow(r[0]));
    InsertEvent(tx, id,
                StateChangeEvent(from, gantry::v1::JOB_STATE_RESTARTING, recorded.reason(),
                                 recorded.message()));
    JobEvent event;
    *event.mutable_restart() = recorded;
    event.mutable_restart()->set_attempt(job.attempt());
    InsertEvent(tx, id, event);
    return absl::OkStatus();
  }));
  Changed(id);
  return job;
}

namespace {

// The job's checkpoints keep_best may keep, best first: the lowest fom, ties to the newest step
// (BestCheckpoint and ExpireCheckpoints agree on it).
#define BEST_CHECKPOINTS                                                               \
  "FROM job_checkpoints WHERE job_id = $1 AND deleted_at IS NULL AND fom IS NOT NULL " \
  "ORDER BY fom ASC, step DESC, sha256 ASC"

// A job_checkpoints row of (sha256, epoch, step, size_bytes, fom).
gantry::v1::CheckpointSaved CheckpointOfRow(const pqxx::row& row) {
  gantry::v1::CheckpointSaved c;
  c.set_sha256(row[0].as<std::string>());
  c.set_epoch(row[1].as<int>());
  c.set_step(row[2].as<int64_t>());
  c.set_size_bytes(row[3].as<int64_t>());
  if (!row[4].is_null()) c.set_fom(row[4].as<double>());
  return c;
}

}  // namespace

absl::StatusOr<std::optional<gantry::v1::CheckpointSaved>> JobRepository::FindCheckpoint(
    const std::string& id, const std::string& sha256) {
  std::optional<gantry::v1::CheckpointSaved> found;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    found.reset();
    pqxx::result r = tx.Exec("job_find_checkpoint",
                             "SELECT sha256, epoch, step, size_bytes, fom FROM job_checkpoints "
                             "WHERE job_id = $1 AND sha256 = $2",
                             id, sha256);
    if (!r.empty()) found = CheckpointOfRow(r[0]);
    return absl::OkStatus();
  }));
  return found;
}

absl::StatusOr<std::optional<gantry::v1::CheckpointSaved>> JobRepository::BestCheckpoint(
    const std::string& id) {
  std::optional<gantry::v1::CheckpointSaved> best;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    best.reset();
    pqxx::result r =
        tx.Exec("job_best_checkpoint",
                "SELECT sha256, epoch, step, size_bytes, fom " BEST_CHECKPOINTS " LIMIT 1", id);
    if (!r.empty()) best = CheckpointOfRow(r[0]);
    return absl::OkStatus();
  }));
  return best;
}

absl::StatusOr<bool> JobRepository::RecordCheckpoint(const std::string& id, int attempt,
                                                     const gantry::v1::CheckpointSaved& saved) {
  bool newest = false;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result cur =
        tx.Exec("job_lock_attempt",
                "SELECT attempt, latest_checkpoint FROM jobs WHERE id = $1 FOR UPDATE", id);
    if (cur.empty()) return JobNotFound(id);
    if (attempt < cur[0][0].as<int>()) {
      return absl::FailedPreconditionError(
          absl::StrCat("header.attempt: ", attempt, " is an earlier attempt of job ", id, " (now ",
                       cur[0][0].as<int>(), "); its checkpoint is not kept"));
    }
    gantry::v1::CheckpointSaved latest;
    if (!cur[0][1].is_null()) RETURN_IF_ERROR(sql::ParseBytes(cur[0][1], &latest));
    newest = cur[0][1].is_null() || saved.step() >= latest.step();
    tx.Exec("job_checkpoint_insert",
            "INSERT INTO job_checkpoints (job_id, sha256, epoch, step, attempt, size_bytes, fom) "
            "VALUES ($1, $2, $3, $4, $5, $6, CASE WHEN $7 THEN $8::double precision END) "
            "ON CONFLICT (job_id, sha256) DO UPDATE SET deleted_at = NULL, "
            "fom = COALESCE(EXCLUDED.fom, job_checkpoints.fom)",
            id, saved.sha256(), saved.epoch(), saved.step(), attempt, saved.size_bytes(),
            saved.has_fom(), saved.has_fom() ? saved.fom() : 0.0);
    if (newest) {
      tx.Exec("job_latest_checkpoint",
              "UPDATE jobs SET latest_checkpoint = $2, updated_at = now() WHERE id = $1", id,
              sql::Bytes(saved));
    }
    JobEvent event;
    *event.mutable_checkpoint_saved() = saved;
    InsertEvent(tx, id, event);
    return absl::OkStatus();
  }));
  Changed(id);
  return newest;
}

absl::StatusOr<std::vector<std::string>> JobRepository::ExpireCheckpoints(const std::string& id,
                                                                          int keep_last,
                                                                          bool keep_best) {
  std::vector<std::string> unreferenced;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    unreferenced.clear();
    // Behind the newest keep_last steps (every checkpoint of a kept step stays: ranks that stop
    // together upload equal states as different files, and any of them may be the latest), and
    // not (keep_best) the lowest fom.
    pqxx::result r =
        tx.Exec("job_checkpoints_expire",
                "UPDATE job_checkpoints c SET deleted_at = now() WHERE c.job_id = $1 AND "
                "c.deleted_at IS NULL AND c.step NOT IN (SELECT DISTINCT step FROM job_checkpoints "
                "  WHERE job_id = $1 AND deleted_at IS NULL ORDER BY step DESC LIMIT $2) "
                "AND NOT ($3 AND c.sha256 IN (SELECT sha256 " BEST_CHECKPOINTS
                " LIMIT 1)) "
                "RETURNING c.sha256",
                id, std::max(1, keep_last), keep_best);
    for (const pqxx::row& row : r) {
      const std::string sha = row[0].as<std::string>();
      // A blob another job's checkpoint, a job's resume point or a registered model uses stays.
      pqxx::result used = tx.Exec(
          "checkpoint_blob_used",
          "SELECT 1 WHERE EXISTS (SELECT 1 FROM job_checkpoints WHERE sha256 = $1 AND "
          "deleted_at IS NULL) OR EXISTS (SELECT 1 FROM models WHERE checkpoint_sha256 = $1)",
          sha);
      if (used.empty()) unreferenced.push_back(sha);
    }
    return absl::OkStatus();
  }));
  return unreferenced;
}

absl::Status JobRepository::RecordValidationPoint(const std::string& id, int attempt,
                                                  const gantry::v1::ValidationPoint& point) {
  gantry::v1::ValidationPoint histograms;
  *histograms.mutable_histograms() = point.histograms();
  if (histograms.ByteSizeLong() > kMaxValidationHistogramBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "point.histograms: ", histograms.ByteSizeLong(), " bytes serialized; at most ",
        kMaxValidationHistogramBytes, " bytes per point (send fewer or coarser histograms)"));
  }
  gantry::v1::ValidationPoint stored = point;
  stored.clear_histograms();
  stored.clear_time();
  stored.set_attempt(attempt);
  std::string metrics = "{";
  for (const auto& [name, value] : stored.metrics()) {
    if (metrics.size() > 1) metrics += ",";
    absl::StrAppend(&metrics, JsonString(name), ":", sql::JsonNumber(value));
  }
  metrics += "}";
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result cur =
        tx.Exec("job_validation_lock",
                "SELECT attempt, (SELECT count(*) FROM job_validation_points WHERE job_id = $1), "
                "EXISTS (SELECT 1 FROM job_validation_points WHERE job_id = $1 AND step = $2), "
                "gantry_us(now()) FROM jobs WHERE id = $1 FOR UPDATE",
                id, stored.step());
    if (cur.empty()) return JobNotFound(id);
    if (attempt < cur[0][0].as<int>()) {
      return absl::FailedPreconditionError(
          absl::StrCat("attempt: ", attempt, " is an earlier attempt of job ", id, " (now ",
                       cur[0][0].as<int>(), "); its validation is not kept"));
    }
    if (!cur[0][2].as<bool>() && cur[0][1].as<int64_t>() >= kMaxValidationPoints) {
      return absl::ResourceExhaustedError(
          absl::StrCat("job ", id, " already has ", kMaxValidationPoints,
                       " validation points; checkpoint less often (checkpoint_policy) to keep "
                       "validating"));
    }
    tx.Exec("job_validation_insert",
            "INSERT INTO job_validation_points (job_id, step, epoch, attempt, metrics, point, "
            "histograms) VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7) "
            "ON CONFLICT (job_id, step) DO UPDATE SET epoch = EXCLUDED.epoch, "
            "attempt = EXCLUDED.attempt, created_at = now(), metrics = EXCLUDED.metrics, "
            "point = EXCLUDED.point, histograms = EXCLUDED.histograms",
            id, stored.step(), stored.epoch(), attempt, metrics, sql::Bytes(stored),
            sql::Bytes(histograms));
    JobEvent event;
    *event.mutable_validation_point() = stored;
    sql::SetTimestamp(cur[0][3], event.mutable_validation_point()->mutable_time());
    InsertEvent(tx, id, event);
    return absl::OkStatus();
  }));
  Changed(id);
  return absl::OkStatus();
}

absl::Status JobRepository::AppendValidationCurve(
    const std::string& id, google::protobuf::RepeatedPtrField<gantry::v1::ValidationPoint>* curve) {
  absl::StatusOr<std::vector<gantry::v1::ValidationPoint>> points = ListValidationPoints(id);
  if (!points.ok()) return points.status();
  for (gantry::v1::ValidationPoint& point : *points) *curve->Add() = std::move(point);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<gantry::v1::ValidationPoint>> JobRepository::ListValidationPoints(
    const std::string& id) {
  std::vector<gantry::v1::ValidationPoint> points;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    points.clear();
    pqxx::result r = tx.Exec("job_validation_list",
                             "SELECT point, gantry_us(created_at) FROM job_validation_points "
                             "WHERE job_id = $1 ORDER BY step LIMIT $2",
                             id, kMaxValidationPoints);
    for (const pqxx::row& row : r) {
      gantry::v1::ValidationPoint& point = points.emplace_back();
      RETURN_IF_ERROR(sql::ParseBytes(row[0], &point));
      sql::SetTimestamp(row[1], point.mutable_time());
    }
    return absl::OkStatus();
  }));
  return points;
}

absl::StatusOr<gantry::v1::ValidationPoint> JobRepository::GetValidationPoint(const std::string& id,
                                                                              int64_t step) {
  gantry::v1::ValidationPoint point;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec("job_validation_get",
                             "SELECT point, gantry_us(created_at), histograms FROM "
                             "job_validation_points WHERE job_id = $1 AND step = $2",
                             id, step);
    if (r.empty()) {
      return absl::NotFoundError(absl::StrCat("step: job ", id, " has no validation point at step ",
                                              step,
                                              "; its validation_curve lists the steps it has"));
    }
    point.Clear();
    RETURN_IF_ERROR(sql::ParseBytes(r[0][0], &point));
    sql::SetTimestamp(r[0][1], point.mutable_time());
    if (!r[0][2].is_null()) {
      gantry::v1::ValidationPoint histograms;
      RETURN_IF_ERROR(sql::ParseBytes(r[0][2], &histograms));
      *point.mutable_histograms() = std::move(*histograms.mutable_histograms());
    }
    return absl::OkStatus();
  }));
  return point;
}

absl::StatusOr<int64_t> JobRepository::AppendEvent(const std::string& id, const JobEvent& event) {
  int64_t sequence = 0;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = InsertEvent(tx, id, event);
    if (r.empty()) return JobNotFound(id);
    sequence = r[0][0].as<int64_t>();
    return absl::OkStatus();
  }));
  Changed(id);
  return sequence;
}

absl::StatusOr<std::vector<JobEvent>> JobRepository::ListEvents(const std::string& id,
                                                                int64_t after_sequence, int limit) {
  if (limit <= 0 || limit > 1000) limit = 1000;
  std::vector<JobEvent> events;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    events.clear();
    pqxx::result r = tx.Exec("job_events_list",
                             "SELECT sequence, gantry_us(time), event FROM job_events "
                             "WHERE job_id = $1 AND sequence > $2 ORDER BY sequence LIMIT $3",
                             id, after_sequence, limit);
    if (r.empty()) {
      pqxx::result exists = tx.Exec("job_exists", "SELECT 1 FROM jobs WHERE id = $1", id);
      if (exists.empty()) return JobNotFound(id);
    }
    for (const pqxx::row& row : r) {
      JobEvent e;
      RETURN_IF_ERROR(sql::ParseBytes(row[2], &e));
      e.set_sequence(row[0].as<int64_t>());
      sql::SetTimestamp(row[1], e.mutable_time());
      events.push_back(std::move(e));
    }
    return absl::OkStatus();
  }));
  return events;
}

absl::Status JobRepository::UpdateProgress(const std::string& id,
                                           const gantry::v1::Progress& progress) {
  return db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r =
        tx.Exec("job_progress",
                "UPDATE jobs SET progress = $2, updated_at = now() WHERE id = $1 RETURNING id", id,
                sql::Bytes(progress));
    if (r.empty()) return JobNotFound(id);
    return absl::OkStatus();
  });
}

absl::StatusOr<bool> JobRepository::SetQueuedMessage(const std::string& id,
                                                     const std::string& message) {
  bool changed = false;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r =
        tx.Exec("job_queued_message",
                "UPDATE jobs SET message = $2 WHERE id = $1 AND state = 'JOB_STATE_QUEUED' "
                "AND message IS DISTINCT FROM $2 RETURNING id",
                id, message);
    changed = !r.empty();
    return absl::OkStatus();
  }));
  return changed;
}

absl::Status JobRepository::SetModelRef(const std::string& id, const std::string& model_ref) {
  return db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r =
        tx.Exec("job_model_ref",
                "UPDATE jobs SET model_ref = $2, updated_at = now() WHERE id = $1 RETURNING id", id,
                model_ref);
    if (r.empty()) return JobNotFound(id);
    return absl::OkStatus();
  });
}

absl::StatusOr<std::vector<Job>> JobRepository::ListByState(const std::vector<JobState>& states) {
  std::vector<Job> jobs;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    jobs.clear();
    pqxx::result r =
        tx.Exec("job_by_state",
                "SELECT " JOB_COLUMNS " FROM jobs WHERE state = ANY($1::text[]) ORDER BY seq",
                StateArray(states));
    for (const pqxx::row& row : r) {
      ASSIGN_OR_RETURN(Job job, JobFromRow(row));
      jobs.push_back(std::move(job));
    }
    return absl::OkStatus();
  }));
  return jobs;
}

absl::StatusOr<JobRepository::StateCounts> JobRepository::CountByOwnerAndState() {
  StateCounts counts;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    counts = StateCounts();
    pqxx::result r = tx.Exec("job_state_counts",
                             "SELECT owner, state, count(*) FROM jobs GROUP BY owner, state");
    for (const pqxx::row& row : r) {
      JobState state = gantry::v1::JOB_STATE_UNSPECIFIED;
      if (!gantry::v1::JobState_Parse(row[1].as<std::string>(), &state)) continue;
      counts.jobs[{row[0].as<std::string>(), state}] = row[2].as<int64_t>();
    }
    pqxx::result oldest =
        tx.Exec("job_oldest_queued",
                "SELECT COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 FROM jobs "
                "WHERE state = 'JOB_STATE_QUEUED'");
    counts.oldest_queued_seconds = oldest[0][0].as<double>();
    return absl::OkStatus();
  }));
  return counts;
}

void JobRepository::Changed(const std::string& id) const {
  if (change_listener_) change_listener_(id);
}

}  // namespace gantry::storage
