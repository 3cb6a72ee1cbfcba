// StudyRepository: hyper-parameter studies, their trials and the training jobs of each trial's
// folds.
#ifndef GANTRY_STORAGE_STUDY_REPOSITORY_H_
#define GANTRY_STORAGE_STUDY_REPOSITORY_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gantry/v1/studies.pb.h"
#include "storage/database.h"
#include "storage/page.h"

namespace gantry::storage {

// SUCCEEDED, FAILED and CANCELLED: states a study never leaves.
bool IsTerminalStudyState(gantry::v1::StudyState state);
// Every state but RUNNING: a trial that ended.
bool IsTerminalTrialState(gantry::v1::TrialState state);

// Thread-safe (stateless over a Database, which must outlive it). `owner` arguments restrict to a
// tenant's studies (another tenant's study is NOT_FOUND); "" means any owner (admins, the driver).
// Studies returned here carry what is stored (id, owner, spec, state, reason, message, times, best
// trial and model); the counts and device hours are derived from the trials by the server.
class StudyRepository {
 public:
  explicit StudyRepository(Database& db) : db_(db) {}

  // Stores a new RUNNING study "study-<uuid>". A second Create by the same owner with the same
  // non-empty request_id returns the study the first call created.
  absl::StatusOr<gantry::v1::Study> Create(const std::string& owner,
                                           const gantry::v1::StudySpec& spec,
                                           const std::string& request_id);
  absl::StatusOr<gantry::v1::Study> Get(const std::string& owner, const std::string& id);
  // Newest first; empty `states` = all.
  absl::StatusOr<Page<gantry::v1::Study>> List(const std::string& owner,
                                               const std::vector<gantry::v1::StudyState>& states,
                                               int page_size, const std::string& page_token);
  // Every study (any owner) that is RUNNING or CANCELLING, oldest first (the driver's work).
  absl::StatusOr<std::vector<gantry::v1::Study>> ListActive();

  // Moves the study from one of `allowed_from` to `to` with reason and message (finished_at on a
  // terminal state). FAILED_PRECONDITION naming the current state when it is not allowed.
  absl::StatusOr<gantry::v1::Study> Transition(
      const std::string& id, const std::vector<gantry::v1::StudyState>& allowed_from,
      gantry::v1::StudyState to, const std::string& reason, const std::string& message);
  // Records the best trial so far and its model ("" while unknown).
  absl::Status SetBest(const std::string& id, int trial, const std::string& model_ref);

  // Stores trial `number` (RUNNING) with its parameters. ALREADY_EXISTS when the number is taken,
  // FAILED_PRECONDITION when the study is no longer RUNNING (cancelled or ended meanwhile).
  absl::Status AddTrial(
      const std::string& id, int number,
      const google::protobuf::Map<std::string, gantry::v1::ParameterValue>& params);
  // Records the training job of a trial's fold; a second call for the same fold is a no-op when
  // it names the same job.
  absl::Status AddTrialJob(const std::string& id, int number, int fold, const std::string& job_id);
  // Records the objective of a fold job's model.
  absl::Status SetFoldObjective(const std::string& job_id, double objective);
  // Ends a RUNNING trial (finished_at = now) with its mean objective and spread when known; false
  // when it had already ended.
  absl::StatusOr<bool> FinishTrial(const std::string& id, int number, gantry::v1::TrialState state,
                                   const std::string& message, std::optional<double> objective,
                                   double objective_stddev);

  // The study's trials by number, each with its folds by fold (job state, model and device hours
  // read from the jobs; a job still running counts its time up to now).
  absl::StatusOr<std::vector<gantry::v1::Trial>> ListTrials(const std::string& id);

  // The study and trial a job belongs to, or nullopt for a job no study submitted.
  struct TrialRef {
    std::string study_id;
    int number = 0;
  };
  absl::StatusOr<std::optional<TrialRef>> TrialOfJob(const std::string& job_id);

 private:
  Database& db_;
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_STUDY_REPOSITORY_H_
