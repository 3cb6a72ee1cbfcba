// JobRepository: training jobs, their state machine transitions and their event log.
#ifndef GANTRY_STORAGE_JOB_REPOSITORY_H_
#define GANTRY_STORAGE_JOB_REPOSITORY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gantry/v1/training.pb.h"
#include "storage/database.h"
#include "storage/page.h"

namespace gantry::storage {

// SUCCEEDED, FAILED and CANCELLED: states a job never leaves.
bool IsTerminalJobState(gantry::v1::JobState state);

// Bounds of a job's validation curve (RecordValidationPoint).
inline constexpr int kMaxValidationPoints = 1000;
inline constexpr size_t kMaxValidationHistogramBytes = 4u << 20;

// Thread-safe (stateless over a Database, which must outlive it). The spec is stored as protobuf
// bytes next to the queryable columns (owner, state, labels jsonb, priority, dataset, created_at).
// `owner` arguments: a tenant name restricts to that tenant's jobs (another tenant's job is
// NOT_FOUND); the empty string means "any owner" (admins, the scheduler).
class JobRepository {
 public:
  explicit JobRepository(Database& db) : db_(db) {}

  // Stores a new job: id "job-<uuid>", state QUEUED, reason "Submitted", message "waiting for
  // <world_size> free slots", and its first event (sequence 1, a state_change to QUEUED). With a
  // non-empty request_id, a second Create by the same owner with the same request_id returns the
  // job the first call created (its spec is not compared). With `max_active_jobs` > 0, a new job
  // that would make more than that many of the owner's jobs QUEUED, PLACING, RUNNING or
  // RESTARTING is RESOURCE_EXHAUSTED (checked under a lock on the owner, so concurrent submits
  // through any server never exceed it).
  absl::StatusOr<gantry::v1::Job> Create(const std::string& owner, const gantry::v1::JobSpec& spec,
                                         const std::string& request_id,
                                         int64_t max_active_jobs = 0);

  absl::StatusOr<gantry::v1::Job> Get(const std::string& owner, const std::string& id);

  // Newest first (keyset pagination on the insertion order). Empty `states` = all states; every
  // label_selector pair must be among the job's spec labels.
  absl::StatusOr<Page<gantry::v1::Job>> List(
      const std::string& owner, const std::vector<gantry::v1::JobState>& states,
      const std::map<std::string, std::string>& label_selector, int page_size,
      const std::string& page_token);

  // Atomically moves job `id` from one of `allowed_from` to `to` (row locked with SELECT ... FOR
  // UPDATE), sets reason/message/updated_at, started_at on the first RUNNING, finished_at on
  // SUCCEEDED/FAILED/CANCELLED, restarts+1 on RESTARTING, and appends a state_change event in the
  // same transaction. FAILED_PRECONDITION "job <id> is <STATE>; ..." when the current state is not
  // allowed; NOT_FOUND for an unknown id.
  absl::StatusOr<gantry::v1::Job> Transition(const std::string& id,
                                             const std::vector<gantry::v1::JobState>& allowed_from,
                                             gantry::v1::JobState to, const std::string& reason,
                                             const std::string& message);

  // A retryable failure: moves the job from one of `allowed_from` to RESTARTING with the restart's
  // reason and message, adds 1 to its attempt (and to restarts when restart.counted), and appends
  // a state_change and the restart event (its attempt set to the new attempt) in one transaction.
  // FAILED_PRECONDITION when the job is in another state.
  absl::StatusOr<gantry::v1::Job> BeginRestart(
      const std::string& id, const std::vector<gantry::v1::JobState>& allowed_from,
      const gantry::v1::Restart& restart);

  // An uploaded checkpoint of `attempt`: stored in job_checkpoints, made the job's
  // latest_checkpoint when its step is not behind the current one, and a checkpoint_saved event
  // appended, in one transaction. Returns whether it became the latest. FAILED_PRECONDITION for an
  // attempt older than the job's (a rank of a replaced gang).
  absl::StatusOr<bool> RecordCheckpoint(const std::string& id, int attempt,
                                        const gantry::v1::CheckpointSaved& saved);

  // The job's checkpoint `sha256` as RecordCheckpoint stored it (retention may have expired it
  // since); nullopt when the job uploaded none such.
  absl::StatusOr<std::optional<gantry::v1::CheckpointSaved>> FindCheckpoint(
      const std::string& id, const std::string& sha256);

  // The live checkpoint (not expired) with the lowest fom, as ExpireCheckpoints' keep_best keeps it
  // (ties: the newest step); nullopt when none has a fom.
  absl::StatusOr<std::optional<gantry::v1::CheckpointSaved>> BestCheckpoint(const std::string& id);

  // Retention: marks the job's checkpoints behind its newest `keep_last` steps (at least 1) deleted
  // (with `keep_best`, except the one with the lowest fom: ties go to the newest; checkpoints
  // without a fom are never the best) and returns the sha256 of those whose blob nothing else
  // uses (no live checkpoint row of any job, no model version): the caller removes those blobs.
  absl::StatusOr<std::vector<std::string>> ExpireCheckpoints(const std::string& id, int keep_last,
                                                             bool keep_best = false);

  // A validated checkpoint of `attempt` (one point of the job's validation curve): stored in
  // job_validation_points (replacing an earlier point of the same step) with a validation_point
  // event (metrics only) appended, in one transaction. point.time is set to now and point.attempt
  // to `attempt`. FAILED_PRECONDITION for an attempt older than the job's; RESOURCE_EXHAUSTED when
  // the job already has kMaxValidationPoints points; INVALID_ARGUMENT when the histograms serialize
  // to more than kMaxValidationHistogramBytes. Metric names and values are the caller's to check.
  absl::Status RecordValidationPoint(const std::string& id, int attempt,
                                     const gantry::v1::ValidationPoint& point);

  // The job's validation curve by increasing step, without histograms (at most
  // kMaxValidationPoints). An unknown job has none.
  absl::StatusOr<std::vector<gantry::v1::ValidationPoint>> ListValidationPoints(
      const std::string& id);
  // ListValidationPoints appended to `curve` (Job.validation_curve, ModelVersion.validation_curve).
  absl::Status AppendValidationCurve(
      const std::string& id,
      google::protobuf::RepeatedPtrField<gantry::v1::ValidationPoint>* curve);

  // The point of `step` with its histograms; NOT_FOUND when the job has no point at that step.
  absl::StatusOr<gantry::v1::ValidationPoint> GetValidationPoint(const std::string& id,
                                                                 int64_t step);

  // Appends an event; storage assigns its sequence (per job, 1, 2, ...) and time (now), ignoring
  // those fields of `event`. Returns the sequence. NOT_FOUND for an unknown job.
  absl::StatusOr<int64_t> AppendEvent(const std::string& id, const gantry::v1::JobEvent& event);

  // Events with sequence > after_sequence in increasing order, at most `limit` (<= 0: 1000).
  absl::StatusOr<std::vector<gantry::v1::JobEvent>> ListEvents(const std::string& id,
                                                               int64_t after_sequence, int limit);

  // Replaces the job's latest progress (no event is appended; call AppendEvent for that).
  absl::Status UpdateProgress(const std::string& id, const gantry::v1::Progress& progress);

  // Replaces the message of a job that is still QUEUED (why it waits, as the scheduler sees it);
  // no event is appended and updated_at is kept (an explanation, not a transition). false when the
  // job is not QUEUED any more, unknown, or already carries this message.
  absl::StatusOr<bool> SetQueuedMessage(const std::string& id, const std::string& message);

  // Records the registered model ("name:version") of a job.
  absl::Status SetModelRef(const std::string& id, const std::string& model_ref);

  // How many jobs each owner has in each state, and how long the oldest QUEUED job has waited
  // (0 when none waits): the server's /metrics gauges, read at scrape time.
  struct StateCounts {
    std::map<std::pair<std::string, gantry::v1::JobState>, int64_t> jobs;  // (owner, state)
    double oldest_queued_seconds = 0;
  };
  absl::StatusOr<StateCounts> CountByOwnerAndState();

  // Every job (of any owner) in one of `states`, oldest first (for the scheduler).
  absl::StatusOr<std::vector<gantry::v1::Job>> ListByState(
      const std::vector<gantry::v1::JobState>& states);

  // Called with the job's id after every committed write that appends an event of it (so a
  // watcher can re-read at once). Set before the repository is shared; the listener must be
  // thread-safe and quick.
  void set_change_listener(std::function<void(const std::string& job_id)> listener) {
    change_listener_ = std::move(listener);
  }

 private:
  void Changed(const std::string& id) const;

  Database& db_;
  std::function<void(const std::string& job_id)> change_listener_;
};

}  // namespace gantry::storage

#endif  // GANTRY_STORAGE_JOB_REPOSITORY_H_
