// StudyDriver: runs the stored studies. Each pass reads every active study and its trials from
// PostgreSQL, collects fold results from the trial jobs, stops poor trials early, asks the
// (stateless) optimiser for new points and submits them as ordinary training jobs, and ends the
// study with its best model aliased. It keeps no state of its own, so a restarted server resumes
// every study where the database says it is.
#ifndef GANTRY_SERVER_COORDINATOR_STUDY_DRIVER_H_
#define GANTRY_SERVER_COORDINATOR_STUDY_DRIVER_H_

#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "base/periodic_task.h"
#include "gantry/v1/studies.pb.h"
#include "server/coordinator/job_submitter.h"
#include "server/platform/model_resolver.h"
#include "storage/job_repository.h"
#include "storage/model_repository.h"
#include "storage/study_repository.h"

namespace gantry::server {

// Thread-safe: one pass runs at a time. Every reference must outlive it. Every write is idempotent
// or conditional (trial numbers are unique, trial jobs carry a request id, transitions name the
// states they leave), so two servers driving one database do not duplicate work.
class StudyDriver {
 public:
  // Trial jobs enter through `submitter`; a finished study's alias clears `resolver`'s model cache.
  StudyDriver(storage::StudyRepository& studies, storage::JobRepository& jobs,
              storage::ModelRepository& models, ModelResolver& resolver, JobSubmitter& submitter,
              absl::Duration interval);
  ~StudyDriver();  // Stop()
  StudyDriver(const StudyDriver&) = delete;
  StudyDriver& operator=(const StudyDriver&) = delete;

  // Starts the thread that runs a pass every `interval` (an interval <= 0 never starts it).
  void Start() { task_.Start(); }
  // Ends the thread (waits for a pass under way). Idempotent.
  void Stop() { task_.Stop(); }

  // One pass over every RUNNING or CANCELLING study. Errors of one study are logged and the
  // others still advance; the returned status is the first error.
  absl::Status RunOnce() ABSL_LOCKS_EXCLUDED(pass_mu_);

  // Cancels a trial job: QUEUED ends CANCELLED at once, a running one goes CANCELLING. Jobs that
  // already ended are left alone.
  static absl::Status CancelTrialJob(storage::JobRepository& jobs, const std::string& job_id,
                                     const std::string& message);

 private:
  absl::Status Advance(const gantry::v1::Study& study) ABSL_EXCLUSIVE_LOCKS_REQUIRED(pass_mu_);
  // Collects results of a RUNNING trial's folds, submits folds not yet submitted and ends the
  // trial when its folds say so.
  absl::Status FollowTrial(const gantry::v1::Study& study, const gantry::v1::Trial& trial)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(pass_mu_);
  // The early-stopping rule on a RUNNING trial; true when it stopped the trial.
  absl::StatusOr<bool> MaybeStopEarly(const gantry::v1::Study& study,
                                      const gantry::v1::Trial& trial,
                                      const std::vector<gantry::v1::Trial>& trials)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(pass_mu_);
  // Stores `count` new trials suggested by the optimiser and submits their jobs. Sets
  // `exhausted` when the search space has no untried point left (grid).
  absl::Status StartTrials(const gantry::v1::Study& study,
                           const std::vector<gantry::v1::Trial>& trials, int count, bool* exhausted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(pass_mu_);
  // Submits fold `fold` of trial `number` (idempotent by request id) and records its job.
  absl::Status SubmitFold(const gantry::v1::Study& study, int number,
                          const google::protobuf::Map<std::string, gantry::v1::ParameterValue>& p,
                          int fold) ABSL_EXCLUSIVE_LOCKS_REQUIRED(pass_mu_);
  // Ends the study: the best trial's best fold model aliased with the study id, SUCCEEDED; FAILED
  // when no trial has an objective.
  absl::Status Finish(const gantry::v1::Study& study, const std::vector<gantry::v1::Trial>& trials)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(pass_mu_);
  // Ends every running trial of a cancelled study once its jobs stopped; then the study.
  absl::Status Cancel(const gantry::v1::Study& study, const std::vector<gantry::v1::Trial>& trials)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(pass_mu_);

  storage::StudyRepository& studies_;
  storage::JobRepository& jobs_;      // the trial jobs: states, validation points, cancellation
  storage::ModelRepository& models_;  // fold models' metrics; the best model's alias
  ModelResolver& resolver_;
  JobSubmitter& submitter_;
  absl::Mutex pass_mu_;  // one pass at a time (the thread, or a test calling RunOnce)
  PeriodicTask task_;    // last: its thread stops before the members it reads go
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_COORDINATOR_STUDY_DRIVER_H_
