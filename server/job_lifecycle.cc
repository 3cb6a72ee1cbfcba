#include "server/job_lifecycle.h"

#include <iostream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "storage/job_repository.h"

namespace gantry::server {

namespace v1 = ::gantry::v1;

absl::StatusOr<v1::Job> JobLifecycle::StartPlacing(const std::string& job_id,
                                                   const std::string& message) {
  return backend_.jobs->Transition(job_id, {v1::QUEUED}, v1::PLACING, "Placed", message);
}

void JobLifecycle::StartRunning(const std::string& job_id, int ranks) {
  backend_.jobs
      ->Transition(job_id, {v1::PLACING}, v1::RUNNING, "Running",
                   absl::StrCat("all ", ranks, " ranks joined the process group"))
      .IgnoreError();
}

void JobLifecycle::End(const std::string& job_id, const std::vector<v1::JobState>& from,
                       v1::JobState to, const std::string& reason, const std::string& message) {
  absl::StatusOr<v1::Job> job = backend_.jobs->Transition(job_id, from, to, reason, message);
  if (!job.ok() && job.status().code() != absl::StatusCode::kFailedPrecondition) {
    std::cerr << "gantry-server: cannot end " << job_id << ": " << job.status() << "\n";
    return;  // retried by the next tick's timeouts
  }
  if (!job.ok()) {  // it already left `from`: where is it now?
    {
      absl::MutexLock lock(&state_.mu);
      if (!state_.active.count(job_id)) return;
    }
    job = backend_.jobs->Get("", job_id);
    if (!job.ok()) return;
  }
  if (!storage::IsTerminalJobState(job->state())) return;
  absl::MutexLock lock(&state_.mu);
  auto it = state_.active.find(job_id);
  if (it == state_.active.end() || it->second.ended) return;
  it->second.ended = true;
  it->second.ended_at = absl::Now();
  if (job->state() != v1::SUCCEEDED) state_.SendCancellation(it->second, message);
}

void JobLifecycle::EndUnclaimed(const v1::Job& job, absl::Duration wait) {
  if (job.state() == v1::CANCELLING) {
    backend_.jobs
        ->Transition(job.id(), {v1::CANCELLING}, v1::CANCELLED, "Cancelled",
                     "no worker reported ranks of the job after the server restarted")
        .IgnoreError();
    return;
  }
  backend_.jobs
      ->Transition(
          job.id(), {v1::PLACING, v1::RUNNING, v1::RESTARTING}, v1::FAILED, "Lost",
          absl::StrCat("no worker reported ranks of the job within ", wait / absl::Seconds(1),
                       " s after the server restarted; resubmit it"))
      .IgnoreError();
}

bool JobLifecycle::LoadOrphans() {
  {
    absl::MutexLock lock(&state_.mu);
    if (state_.orphans_loaded) return true;
  }
  absl::StatusOr<std::vector<v1::Job>> jobs =
      backend_.jobs->ListByState({v1::PLACING, v1::RUNNING, v1::RESTARTING, v1::CANCELLING});
  if (!jobs.ok()) return false;
  absl::MutexLock lock(&state_.mu);
  if (state_.orphans_loaded) return true;  // another caller loaded them meanwhile
  for (const v1::Job& job : *jobs) {
    if (!state_.active.count(job.id())) state_.orphans[job.id()] = job;
  }
  state_.orphans_loaded = true;
  return true;
}

void JobLifecycle::AppendEventOrLog(const std::string& job_id, const v1::JobEvent& event) {
  absl::StatusOr<int64_t> seq = backend_.jobs->AppendEvent(job_id, event);
  if (!seq.ok()) {
    std::cerr << "gantry-server: cannot record an event of " << job_id << ": " << seq.status()
              << "\n";
  }
}

}  // namespace gantry::server
