#include "server/coordinator/job_lifecycle.h"

#include <algorithm>
#include <iostream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "base/log.h"
#include "base/sha256.h"
#include "server/coordinator/pool_resolver.h"
#include "showers/toy_mc.h"
#include "storage/job_repository.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

const std::vector<v1::JobState> kLive = {v1::JOB_STATE_PLACING, v1::JOB_STATE_RUNNING,
                                         v1::JOB_STATE_RESTARTING};

absl::Time TimeOf(const google::protobuf::Timestamp& ts) {
  return absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
}

// Database errors worth retrying (the connection, not the request).
bool Transient(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status) ||
         absl::IsAborted(status) || absl::IsInternal(status);
}

// Queues a job whose restart is stored with the scheduler as attempt `next_attempt` (unless it was
// cancelled or ended meanwhile: then nothing of it runs or waits).
void QueueAgain(CoordinatorState& state, ActiveJob& job, int next_attempt,
                const scheduler::JobRequest& request) ABSL_EXCLUSIVE_LOCKS_REQUIRED(state.mu) {
  state.scheduler.Remove(job.id);
  if (!job.Requeue(next_attempt)) return;
  if (absl::Status st = state.scheduler.Submit(request); !st.ok()) {
    GANTRY_LOG(ERROR) << "cannot queue " << job.id << " again: " << st;
  }
  state.queued.insert(job.id);
}

}  // namespace

absl::StatusOr<v1::Job> JobLifecycle::StartPlacing(const std::string& job_id,
                                                   const std::string& message) {
  return jobs_.Transition(job_id, {v1::JOB_STATE_QUEUED}, v1::JOB_STATE_PLACING, "Placed", message);
}

void JobLifecycle::StartRunning(const std::string& job_id, int attempt, int ranks) {
  jobs_
      .Transition(job_id, {v1::JOB_STATE_PLACING, v1::JOB_STATE_RESTARTING}, v1::JOB_STATE_RUNNING,
                  attempt > 0 ? "Resumed" : "Running",
                  attempt > 0 ? absl::StrCat("attempt ", attempt, ": all ", ranks,
                                             " ranks joined the process group")
                              : absl::StrCat("all ", ranks, " ranks joined the process group"))
      .IgnoreError();
}

void JobLifecycle::End(const std::string& job_id, const std::vector<v1::JobState>& from,
                       v1::JobState to, const std::string& reason, const std::string& message) {
  DeferredEnd end{job_id, from, to, reason, message};
  if (TryEnd(end)) return;
  GANTRY_LOG(WARNING) << job_id << " -> " << v1::JobState_Name(to)
                      << " could not be written; retrying until it is stored";
  absl::MutexLock lock(&deferred_mu_);
  for (const DeferredEnd& d : deferred_ends_) {
    if (d.job_id == job_id) return;  // the first ending decided stays the one retried
  }
  end.tries = 1;
  end.next_try = state_.Now() + absl::Milliseconds(200);
  deferred_ends_.push_back(std::move(end));
}

bool JobLifecycle::TryEnd(const DeferredEnd& end) {
  const std::string& job_id = end.job_id;
  const std::string& message = end.message;
  absl::StatusOr<v1::Job> job = jobs_.Transition(job_id, end.from, end.to, end.reason, message);
  if (!job.ok() && (absl::IsUnavailable(job.status()) || absl::IsAborted(job.status()) ||
                    absl::IsInternal(job.status()))) {
    return false;
  }
  if (!job.ok() && job.status().code() != absl::StatusCode::kFailedPrecondition) {
    GANTRY_LOG(ERROR) << "cannot end " << job_id << ": " << job.status();
    return true;  // e.g. NOT_FOUND: nothing to retry
  }
  if (!job.ok()) {  // it already left `from`: where is it now?
    {
      absl::MutexLock lock(&state_.mu);
      if (!state_.active.count(job_id)) return true;
    }
    job = jobs_.Get("", job_id);
    if (!job.ok()) return true;
  }
  if (!storage::IsTerminalJobState(job->state())) return true;
  absl::MutexLock lock(&state_.mu);
  auto it = state_.active.find(job_id);
  if (it == state_.active.end() || !it->second.End()) return true;
  it->second.ended_at = state_.Now();
  if (it->second.Queued()) {  // queued for a restart: nothing runs, nothing is leased
    state_.scheduler.Remove(job_id);
    state_.queued.erase(job_id);
  }
  if (job->state() != v1::JOB_STATE_SUCCEEDED) state_.SendCancellation(it->second, message);
  return true;
}

void JobLifecycle::Fail(const std::string& job_id, int attempt, FailureClass failure,
                        const std::string& message) {
  int64_t latest_step = -1;
  double step_seconds = 0;
  {
    absl::MutexLock lock(&state_.mu);
    auto it = state_.active.find(job_id);
    if (it == state_.active.end()) return;
    ActiveJob& a = it->second;
    // One failure per attempt is handled (the claim); none of a cancelled, ended or queued job.
    if ((attempt >= 0 && attempt != a.attempt) || !a.ClaimFailure()) return;
    if (failure.retryable) {
      // The attempt's own workers (an adopted job's placement is unknown: all it has).
      const std::set<std::string> workers =
          a.rank_workers.empty()
              ? a.workers
              : std::set<std::string>(a.rank_workers.begin(), a.rank_workers.end());
      bool preempted = false, drained = false;
      for (const std::string& w : workers) {
        preempted |= state_.preempting.count(w) > 0;
        drained |= state_.drained.count(w) > 0;
      }
      if (preempted) {
        failure = Preempted();
      } else if (drained) {
        failure = Drained();
      }
    }
    latest_step = a.latest_step;
    step_seconds = a.MedianStepSeconds();
  }
  if (!failure.retryable) {
    Unclaim(job_id);
    End(job_id, kLive, v1::JOB_STATE_FAILED, failure.reason, message);
    return;
  }
  if (!Restart(job_id, failure, message, latest_step, step_seconds)) {
    Unclaim(job_id);
    Defer({job_id, attempt, failure, message});
  }
}

bool JobLifecycle::Restart(const std::string& job_id, const FailureClass& failure,
                           const std::string& message, int64_t latest_step, double step_seconds) {
  absl::StatusOr<v1::Job> job = jobs_.Get("", job_id);
  if (!job.ok()) return !Transient(job.status());  // gone: nothing to restart
  if (storage::IsTerminalJobState(job->state()) || job->state() == v1::JOB_STATE_CANCELLING)
    return true;
  const int max_restarts = job->spec().max_restarts();
  if (failure.counted && job->restarts() >= max_restarts) {
    Unclaim(job_id);
    End(job_id, kLive, v1::JOB_STATE_FAILED, failure.reason,
        max_restarts == 0 ? message
                          : absl::StrCat(message, " (", job->restarts(), " of max_restarts ",
                                         max_restarts, " restarts used)"));
    return true;
  }
  absl::StatusOr<scheduler::JobRequest> request = MakeJobRequest(*job);
  if (!request.ok()) {
    if (Transient(request.status())) return false;
    Unclaim(job_id);
    End(job_id, kLive, v1::JOB_STATE_FAILED, "DatasetMissing",
        absl::StrCat(message, "; it cannot restart: ", request.status().message()));
    return true;
  }
  v1::Restart restart;
  restart.set_reason(failure.reason);
  restart.set_message(message);
  restart.set_counted(failure.counted);
  const v1::CheckpointSaved& from = job->latest_checkpoint();
  restart.set_resumed_from_sha256(from.sha256());
  restart.set_resumed_from_epoch(from.epoch());
  restart.set_resumed_from_step(from.step());
  if (latest_step < 0) latest_step = job->progress().step();
  const int64_t redone = std::max<int64_t>(0, latest_step - from.step());
  restart.set_redone_steps(redone);
  restart.set_redone_seconds(static_cast<double>(redone) * step_seconds);
  const std::string resume =
      from.sha256().empty()
          ? std::string("no checkpoint yet: training starts from scratch")
          : absl::StrFormat("resuming from the checkpoint of step %d (epoch %d), %d steps redone",
                            from.step(), from.epoch(), redone);
  restart.set_message(absl::StrCat(message, "; ", resume));
  absl::StatusOr<v1::Job> restarted = jobs_.BeginRestart(job_id, kLive, restart);
  if (!restarted.ok()) {
    if (Transient(restarted.status())) return false;
    Unclaim(job_id);  // left the live states meanwhile (cancelled): nothing to restart
    return true;
  }
  GANTRY_LOG(WARNING) << job_id << " restarts as attempt " << restarted->attempt() << " ("
                      << failure.reason << "): " << restart.message();
  absl::MutexLock lock(&state_.mu);
  auto it = state_.active.find(job_id);
  if (it == state_.active.end()) return true;
  ActiveJob& a = it->second;
  state_.SendCancellation(a, absl::StrCat("restarting: ", message));
  QueueAgain(state_, a, restarted->attempt(), *request);
  return true;
}

void JobLifecycle::Unclaim(const std::string& job_id) {
  absl::MutexLock lock(&state_.mu);
  auto it = state_.active.find(job_id);
  if (it != state_.active.end()) it->second.ReleaseClaim();
}

void JobLifecycle::Defer(Deferred deferred) {
  GANTRY_LOG(WARNING) << "the failure of " << deferred.job_id << " could not be written; retrying";
  absl::MutexLock lock(&deferred_mu_);
  deferred_.push_back(std::move(deferred));
}

void JobLifecycle::RetryDeferred() {
  std::vector<Deferred> pending;
  {
    absl::MutexLock lock(&deferred_mu_);
    pending.swap(deferred_);
  }
  for (Deferred& d : pending) Fail(d.job_id, d.attempt, d.failure, d.message);

  std::vector<DeferredEnd> ends;
  const absl::Time now = state_.Now();
  {
    absl::MutexLock lock(&deferred_mu_);
    for (auto it = deferred_ends_.begin(); it != deferred_ends_.end();) {
      if (it->next_try <= now) {
        ends.push_back(std::move(*it));
        it = deferred_ends_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (DeferredEnd& end : ends) {
    if (TryEnd(end)) {
      GANTRY_LOG(INFO) << end.job_id << " -> " << v1::JobState_Name(end.to) << " stored after "
                       << end.tries << " failed attempt(s)";
      continue;
    }
    ++end.tries;
    end.next_try =
        state_.Now() + std::min(absl::Milliseconds(200) * (int64_t{1} << std::min(end.tries, 6)),
                                absl::Seconds(10));
    absl::MutexLock lock(&deferred_mu_);
    deferred_ends_.push_back(std::move(end));
  }
}

void JobLifecycle::EndUnclaimed(const v1::Job& job, absl::Duration wait) {
  if (job.state() == v1::JOB_STATE_CANCELLING) {
    jobs_
        .Transition(job.id(), {v1::JOB_STATE_CANCELLING}, v1::JOB_STATE_CANCELLED, "Cancelled",
                    "no worker reported ranks of the job after the server restarted")
        .IgnoreError();
    return;
  }
  absl::StatusOr<scheduler::JobRequest> request = MakeJobRequest(job);
  {
    absl::MutexLock lock(&state_.mu);
    if (state_.active.count(job.id())) return;  // placed or adopted meanwhile
    ActiveJob& a = state_.active[job.id()];
    a.id = job.id();
    a.owner = job.owner();
    a.spec = job.spec();
    a.attempt = job.attempt();
    a.leased = false;
    a.placed_at = state_.Now();
    if (job.state() == v1::JOB_STATE_RESTARTING && request.ok()) {
      // The server stopped while this restart was under way: it goes on.
      QueueAgain(state_, a, a.attempt, *request);
      return;
    }
  }
  Fail(job.id(), -1, WorkerLost(),
       absl::StrCat("no worker reported ranks of the job within ", wait / absl::Seconds(1),
                    " s after the server restarted"));
}

bool JobLifecycle::LoadOrphans() {
  {
    absl::MutexLock lock(&state_.mu);
    if (state_.orphans_loaded) return true;
  }
  absl::StatusOr<std::vector<v1::Job>> jobs =
      jobs_.ListByState({v1::JOB_STATE_PLACING, v1::JOB_STATE_RUNNING, v1::JOB_STATE_RESTARTING,
                         v1::JOB_STATE_CANCELLING});
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
  absl::StatusOr<int64_t> seq = jobs_.AppendEvent(job_id, event);
  if (!seq.ok()) {
    GANTRY_LOG(ERROR) << "cannot record an event of " << job_id << ": " << seq.status();
  }
}

absl::StatusOr<scheduler::JobRequest> JobLifecycle::MakeJobRequest(const v1::Job& job) {
  scheduler::JobRequest request;
  request.id = job.id();
  request.tenant = job.owner();
  request.priority = job.spec().priority();
  request.submitted = TimeOf(job.created_at());
  request.world_size = job.spec().world_size();
  request.device = job.spec().resources_per_rank().device();  // the scheduler normalises
  request.selector.insert(job.spec().worker_selector().begin(), job.spec().worker_selector().end());
  // The pool is chosen when the job is queued (again): the cheapest eligible one then. A pool that
  // has gone since submission leaves the job waiting for workers labelled with its name.
  absl::StatusOr<std::string> pool = ResolveJobPool(pools_, job.spec());
  if (pool.ok() && !pool->empty()) {
    request.selector["pool"] = *pool;
  } else if (!pool.ok() && !job.spec().pool().empty()) {
    request.selector["pool"] = job.spec().pool();
  }
  if (absl::StartsWith(job.spec().dataset(), "ds-")) {
    absl::StatusOr<v1::Dataset> ds = datasets_.Get(job.owner(), job.spec().dataset());
    if (!ds.ok()) {
      return absl::Status(ds.status().code(), absl::StrCat("dataset ", job.spec().dataset(),
                                                           " is gone: ", ds.status().message()));
    }
    request.dataset_key = ds->sha256();
  } else if (absl::StartsWith(job.spec().dataset(), "toymc:")) {
    // A worker caches a simulated set under the sha256 of its canonical spec (workers/runner).
    absl::StatusOr<showers::ToyMcConfig> toy = showers::ParseToyMcSpec(job.spec().dataset());
    if (toy.ok()) request.dataset_key = Sha256Hex(showers::FormatToyMcSpec(*toy));
  }
  return request;
}

}  // namespace gantry::server
