#include "storage/study_repository.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"
#include "gantry/v1/training.pb.h"
#include "storage/sql_util.h"
#include "storage/transaction.h"

namespace gantry::storage {

namespace {

namespace v1 = ::gantry::v1;

#define STUDY_COLUMNS                                                                       \
  "id, owner, spec, state, reason, message, gantry_us(created_at), gantry_us(updated_at), " \
  "gantry_us(finished_at), best_trial, best_model_ref, seq"

absl::StatusOr<v1::Study> StudyFromRow(const pqxx::row& row) {
  v1::Study study;
  study.set_id(row[0].as<std::string>());
  study.set_owner(row[1].as<std::string>());
  RETURN_IF_ERROR(sql::ParseBytes(row[2], study.mutable_spec()));
  v1::StudyState state;
  if (!v1::StudyState_Parse(row[3].as<std::string>(), &state)) {
    return absl::InternalError(
        absl::StrCat("study ", study.id(), " has unknown state ", row[3].c_str()));
  }
  study.set_state(state);
  study.set_reason(row[4].as<std::string>());
  study.set_message(row[5].as<std::string>());
  sql::SetTimestamp(row[6], study.mutable_created_at());
  sql::SetTimestamp(row[7], study.mutable_updated_at());
  if (!row[8].is_null()) sql::SetTimestamp(row[8], study.mutable_finished_at());
  study.set_best_trial(row[9].as<int>());
  study.set_best_model_ref(row[10].as<std::string>());
  return study;
}

std::string StateArray(const std::vector<v1::StudyState>& states) {
  std::vector<std::string> names;
  for (v1::StudyState s : states) names.push_back(v1::StudyState_Name(s));
  return absl::StrCat("{", absl::StrJoin(names, ","), "}");
}

absl::Status StudyNotFound(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("study ", id, " does not exist"));
}

// Device-hours a job has used: ranks x devices per rank x hours since it started running (up to
// `now_us` while it runs).
double DeviceHours(const v1::JobSpec& spec, const pqxx::field& started_us,
                   const pqxx::field& finished_us, int64_t now_us) {
  if (started_us.is_null()) return 0;
  const int64_t end = finished_us.is_null() ? now_us : finished_us.as<int64_t>();
  const double hours = std::max<int64_t>(0, end - started_us.as<int64_t>()) / 3.6e9;
  const int devices = spec.resources_per_rank().device() == v1::DEVICE_KIND_GPU
                          ? std::max(1, spec.resources_per_rank().count())
                          : 1;
  return hours * std::max(1, spec.world_size()) * devices;
}

}  // namespace

bool IsTerminalStudyState(v1::StudyState s) {
  return s == v1::STUDY_STATE_SUCCEEDED || s == v1::STUDY_STATE_FAILED ||
         s == v1::STUDY_STATE_CANCELLED;
}

bool IsTerminalTrialState(v1::TrialState s) { return s != v1::TRIAL_STATE_RUNNING; }

absl::StatusOr<v1::Study> StudyRepository::Create(const std::string& owner,
                                                  const v1::StudySpec& spec,
                                                  const std::string& request_id) {
  if (owner.empty()) return absl::InvalidArgumentError("a study needs an owner");
  const char* request = request_id.empty() ? nullptr : request_id.c_str();
  v1::Study study;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec(
        "study_insert",
        "INSERT INTO studies (id, owner, state, reason, message, spec, request_id) "
        "VALUES ($1, $2, 'STUDY_STATE_RUNNING', 'Created', 'waiting for the first trials', $3, $4) "
        "ON CONFLICT (owner, request_id) DO NOTHING RETURNING " STUDY_COLUMNS,
        sql::NewId("study"), owner, sql::Bytes(spec), request);
    if (r.empty()) {
      r = tx.Exec("study_by_request",
                  "SELECT " STUDY_COLUMNS " FROM studies WHERE owner = $1 AND request_id = $2",
                  owner, request_id);
      if (r.empty()) return absl::AbortedError("concurrent create; retry");
    }
    ASSIGN_OR_RETURN(study, StudyFromRow(r[0]));
    return absl::OkStatus();
  }));
  return study;
}

absl::StatusOr<v1::Study> StudyRepository::Get(const std::string& owner, const std::string& id) {
  v1::Study study;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r =
        tx.Exec("study_get",
                "SELECT " STUDY_COLUMNS " FROM studies WHERE id = $1 AND ($2 = '' OR owner = $2)",
                id, owner);
    if (r.empty()) return StudyNotFound(id);
    ASSIGN_OR_RETURN(study, StudyFromRow(r[0]));
    return absl::OkStatus();
  }));
  return study;
}

absl::StatusOr<Page<v1::Study>> StudyRepository::List(const std::string& owner,
                                                      const std::vector<v1::StudyState>& states,
                                                      int page_size,
                                                      const std::string& page_token) {
  ASSIGN_OR_RETURN(int limit, sql::PageSize(page_size));
  int64_t before = 0;
  if (!page_token.empty()) {
    ASSIGN_OR_RETURN(std::vector<std::string> keys, sql::DecodePageToken("studies", page_token, 1));
    if (!absl::SimpleAtoi(keys[0], &before) || before <= 0) {
      return absl::InvalidArgumentError("page_token is malformed; pass next_page_token unchanged");
    }
  }
  Page<v1::Study> page;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    page = {};
    pqxx::result r = tx.Exec("study_list",
                             "SELECT " STUDY_COLUMNS
                             " FROM studies WHERE ($1 = '' OR owner = $1) "
                             "AND (cardinality($2::text[]) = 0 OR state = ANY($2::text[])) "
                             "AND ($3::bigint = 0 OR seq < $3) ORDER BY seq DESC LIMIT $4",
                             owner, StateArray(states), before, limit + 1);
    int64_t last_seq = 0;
    for (size_t i = 0; i < r.size() && static_cast<int>(i) < limit; ++i) {
      ASSIGN_OR_RETURN(v1::Study study, StudyFromRow(r[i]));
      page.items.push_back(std::move(study));
      last_seq = r[i][11].as<int64_t>();
    }
    if (static_cast<int>(r.size()) > limit) {
      page.next_page_token = sql::EncodePageToken("studies", {absl::StrCat(last_seq)});
    }
    return absl::OkStatus();
  }));
  return page;
}

absl::StatusOr<std::vector<v1::Study>> StudyRepository::ListActive() {
  std::vector<v1::Study> studies;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    studies.clear();
    pqxx::result r = tx.Exec("study_active", "SELECT " STUDY_COLUMNS
                                             " FROM studies WHERE state IN ('STUDY_STATE_RUNNING', "
                                             "'STUDY_STATE_CANCELLING') ORDER BY seq");
    for (const pqxx::row& row : r) {
      ASSIGN_OR_RETURN(v1::Study study, StudyFromRow(row));
      studies.push_back(std::move(study));
    }
    return absl::OkStatus();
  }));
  return studies;
}

absl::StatusOr<v1::Study> StudyRepository::Transition(
    const std::string& id, const std::vector<v1::StudyState>& allowed_from, v1::StudyState to,
    const std::string& reason, const std::string& message) {
  v1::Study study;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result cur =
        tx.Exec("study_lock", "SELECT state FROM studies WHERE id = $1 FOR UPDATE", id);
    if (cur.empty()) return StudyNotFound(id);
    v1::StudyState from = v1::STUDY_STATE_UNSPECIFIED;
    v1::StudyState_Parse(cur[0][0].as<std::string>(), &from);
    if (std::find(allowed_from.begin(), allowed_from.end(), from) == allowed_from.end()) {
      std::vector<std::string> allowed;
      for (v1::StudyState s : allowed_from) allowed.push_back(v1::StudyState_Name(s));
      return absl::FailedPreconditionError(
          absl::StrCat("study ", id, " is ", v1::StudyState_Name(from), "; it can become ",
                       v1::StudyState_Name(to), " only from ", absl::StrJoin(allowed, ", ")));
    }
    pqxx::result r =
        tx.Exec("study_transition",
                "UPDATE studies SET state = $2, reason = $3, message = $4, updated_at = now(), "
                "finished_at = CASE WHEN $5 THEN now() ELSE finished_at END WHERE id = $1 "
                "RETURNING " STUDY_COLUMNS,
                id, v1::StudyState_Name(to), reason, message, IsTerminalStudyState(to));
    ASSIGN_OR_RETURN(study, StudyFromRow(r[0]));
    return absl::OkStatus();
  }));
  return study;
}

absl::Status StudyRepository::SetBest(const std::string& id, int trial,
                                      const std::string& model_ref) {
  return db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec("study_set_best",
                             "UPDATE studies SET best_trial = $2, best_model_ref = $3, "
                             "updated_at = now() WHERE id = $1 RETURNING id",
                             id, trial, model_ref);
    if (r.empty()) return StudyNotFound(id);
    return absl::OkStatus();
  });
}

absl::Status StudyRepository::AddTrial(
    const std::string& id, int number,
    const google::protobuf::Map<std::string, v1::ParameterValue>& params) {
  v1::Trial stored;
  *stored.mutable_parameters() = params;
  return db_.Transact([&](Transaction& tx) -> absl::Status {
    // Shares the study row's lock with Transition (FOR UPDATE), so a trial is either stored before
    // a cancellation or refused after it.
    pqxx::result state =
        tx.Exec("study_lock_shared", "SELECT state FROM studies WHERE id = $1 FOR SHARE", id);
    if (state.empty()) return StudyNotFound(id);
    if (state[0][0].as<std::string>() != "STUDY_STATE_RUNNING") {
      return absl::FailedPreconditionError(absl::StrCat("study ", id, " is ", state[0][0].c_str(),
                                                        "; trials are added only while it runs"));
    }
    pqxx::result r = tx.Exec("study_trial_insert",
                             "INSERT INTO study_trials (study_id, number, state, parameters) "
                             "VALUES ($1, $2, 'TRIAL_STATE_RUNNING', $3) "
                             "ON CONFLICT (study_id, number) DO NOTHING RETURNING number",
                             id, number, sql::Bytes(stored));
    if (r.empty()) {
      return absl::AlreadyExistsError(absl::StrCat("study ", id, " already has trial ", number));
    }
    tx.Exec("study_touch", "UPDATE studies SET updated_at = now() WHERE id = $1", id);
    return absl::OkStatus();
  });
}

absl::Status StudyRepository::AddTrialJob(const std::string& id, int number, int fold,
                                          const std::string& job_id) {
  return db_.Transact([&](Transaction& tx) -> absl::Status {
    tx.Exec("study_trial_job_insert",
            "INSERT INTO study_trial_jobs (study_id, number, fold, job_id) "
            "VALUES ($1, $2, $3, $4) ON CONFLICT (study_id, number, fold) DO NOTHING",
            id, number, fold, job_id);
    pqxx::result r = tx.Exec(
        "study_trial_job_get",
        "SELECT job_id FROM study_trial_jobs WHERE study_id = $1 AND number = $2 AND fold = $3", id,
        number, fold);
    if (r.empty() || r[0][0].as<std::string>() != job_id) {
      return absl::FailedPreconditionError(absl::StrCat(
          "fold ", fold, " of trial ", number, " of study ", id, " already has another job"));
    }
    return absl::OkStatus();
  });
}

absl::Status StudyRepository::SetFoldObjective(const std::string& job_id, double objective) {
  return db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r =
        tx.Exec("study_fold_objective",
                "UPDATE study_trial_jobs SET objective = $2 WHERE job_id = $1 RETURNING job_id",
                job_id, objective);
    if (r.empty()) return absl::NotFoundError(absl::StrCat("job ", job_id, " is in no study"));
    return absl::OkStatus();
  });
}

absl::StatusOr<bool> StudyRepository::FinishTrial(const std::string& id, int number,
                                                  v1::TrialState state, const std::string& message,
                                                  std::optional<double> objective,
                                                  double objective_stddev) {
  bool finished = false;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r = tx.Exec(
        "study_trial_finish",
        "UPDATE study_trials SET state = $3, message = $4, objective = $5, objective_stddev = $6, "
        "finished_at = now() WHERE study_id = $1 AND number = $2 AND state = "
        "'TRIAL_STATE_RUNNING' RETURNING number",
        id, number, v1::TrialState_Name(state), message, objective, objective_stddev);
    finished = !r.empty();
    if (finished) {
      tx.Exec("study_touch", "UPDATE studies SET updated_at = now() WHERE id = $1", id);
    }
    return absl::OkStatus();
  }));
  return finished;
}

absl::StatusOr<std::vector<v1::Trial>> StudyRepository::ListTrials(const std::string& id) {
  std::vector<v1::Trial> trials;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    trials.clear();
    pqxx::result r = tx.Exec(
        "study_trials",
        "SELECT number, state, message, parameters, objective, objective_stddev, "
        "gantry_us(created_at), gantry_us(finished_at) FROM study_trials WHERE study_id = $1 "
        "ORDER BY number",
        id);
    std::map<int, size_t> index;
    for (const pqxx::row& row : r) {
      v1::Trial trial;
      RETURN_IF_ERROR(sql::ParseBytes(row[3], &trial));
      trial.set_number(row[0].as<int>());
      v1::TrialState state;
      if (!v1::TrialState_Parse(row[1].as<std::string>(), &state)) {
        return absl::InternalError(absl::StrCat("trial ", trial.number(), " of study ", id,
                                                " has unknown state ", row[1].c_str()));
      }
      trial.set_state(state);
      trial.set_message(row[2].as<std::string>());
      if (!row[4].is_null()) trial.set_objective(row[4].as<double>());
      trial.set_objective_stddev(row[5].as<double>());
      sql::SetTimestamp(row[6], trial.mutable_created_at());
      if (!row[7].is_null()) sql::SetTimestamp(row[7], trial.mutable_finished_at());
      index[trial.number()] = trials.size();
      trials.push_back(std::move(trial));
    }
    pqxx::result jobs =
        tx.Exec("study_trial_jobs",
                "SELECT t.number, t.fold, t.job_id, t.objective, j.state, j.model_ref, j.spec, "
                "gantry_us(j.started_at), gantry_us(j.finished_at), gantry_us(now()) "
                "FROM study_trial_jobs t JOIN jobs j ON j.id = t.job_id WHERE t.study_id = $1 "
                "ORDER BY t.number, t.fold",
                id);
    for (const pqxx::row& row : jobs) {
      auto it = index.find(row[0].as<int>());
      if (it == index.end()) continue;
      v1::Trial& trial = trials[it->second];
      v1::FoldResult* fold = trial.add_folds();
      fold->set_fold(row[1].as<int>());
      fold->set_job_id(row[2].as<std::string>());
      if (!row[3].is_null()) fold->set_objective(row[3].as<double>());
      v1::JobState job_state = v1::JOB_STATE_UNSPECIFIED;
      v1::JobState_Parse(row[4].as<std::string>(), &job_state);
      fold->set_job_state(job_state);
      fold->set_model_ref(row[5].as<std::string>());
      v1::JobSpec spec;
      RETURN_IF_ERROR(sql::ParseBytes(row[6], &spec));
      fold->set_device_hours(DeviceHours(spec, row[7], row[8], row[9].as<int64_t>()));
      trial.set_device_hours(trial.device_hours() + fold->device_hours());
    }
    return absl::OkStatus();
  }));
  return trials;
}

absl::StatusOr<std::optional<StudyRepository::TrialRef>> StudyRepository::TrialOfJob(
    const std::string& job_id) {
  std::optional<TrialRef> ref;
  RETURN_IF_ERROR(db_.Transact([&](Transaction& tx) -> absl::Status {
    pqxx::result r =
        tx.Exec("study_trial_of_job",
                "SELECT study_id, number FROM study_trial_jobs WHERE job_id = $1", job_id);
    ref.reset();
    if (!r.empty()) ref = TrialRef{r[0][0].as<std::string>(), r[0][1].as<int>()};
    return absl::OkStatus();
  }));
  return ref;
}

}  // namespace gantry::storage
