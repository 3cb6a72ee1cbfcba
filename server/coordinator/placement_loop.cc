#include "server/coordinator/placement_loop.h"

#include <algorithm>
#include <iostream>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/failure_policy.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "server/platform/server_metrics.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

// A transition decided under the lock, written after releasing it.
struct Ending {
  std::string job_id;
  std::vector<v1::JobState> from;
  v1::JobState to;
  std::string reason;
  std::string message;
};

// A failure decided under the lock, handled (restart or end) after releasing it.
struct Failure {
  std::string job_id;
  int attempt;
  FailureClass failure;
  std::string message;
};

void EndAll(JobLifecycle& lifecycle, const std::vector<Ending>& endings) {
  for (const Ending& e : endings) lifecycle.End(e.job_id, e.from, e.to, e.reason, e.message);
}

void FailAll(JobLifecycle& lifecycle, const std::vector<Failure>& failures) {
  for (const Failure& f : failures) lifecycle.Fail(f.job_id, f.attempt, f.failure, f.message);
}

}  // namespace

void PlacementLoop::Start() {
  {
    absl::MutexLock lock(&state_.mu);
    state_.started_at = state_.Now();
  }
  task_.Start();
}

void PlacementLoop::Stop() { task_.Stop(); }

void PlacementLoop::Tick(absl::Time now) {
  lifecycle_.RetryDeferred();
  EndUnclaimedOrphans(now);
  // One query a tick for the jobs the database drives: new QUEUED ones, CANCELLING ones.
  absl::StatusOr<std::vector<v1::Job>> jobs =
      jobs_.ListByState({v1::JOB_STATE_QUEUED, v1::JOB_STATE_CANCELLING});
  if (!jobs.ok()) {
    GANTRY_LOG(ERROR) << "the scheduler cannot list jobs: " << jobs.status();
  } else {
    std::vector<v1::Job> queued, cancelling;
    for (v1::Job& job : *jobs)
      (job.state() == v1::JOB_STATE_QUEUED ? queued : cancelling).push_back(std::move(job));
    SyncQueue(HoldOverBudget(std::move(queued), now));
    HandleCancellations(cancelling, now);
  }
  ExpireWorkers(now);
  RefreshTenantPolicies(now);
  PlaceJobs(now);
  ReapEnded(now);
  WatchProgress(now);
  ExplainWaits(now);
}

void PlacementLoop::EndUnclaimedOrphans(absl::Time now) {
  if (!lifecycle_.LoadOrphans()) return;
  const absl::Duration wait = absl::Milliseconds(options_.lease_timeout_ms);
  std::vector<v1::Job> unclaimed;
  {
    absl::MutexLock lock(&state_.mu);
    // A coordinator driven by Tick alone (never Started) starts its wait at its first tick.
    if (state_.started_at == absl::InfinitePast()) state_.started_at = now;
    if (now - state_.started_at <= wait) return;
    for (auto& [id, job] : state_.orphans) unclaimed.push_back(std::move(job));
    state_.orphans.clear();
  }
  for (const v1::Job& job : unclaimed) lifecycle_.EndUnclaimed(job, wait);
}

void PlacementLoop::RefreshTenantPolicies(absl::Time now) {
  if (now - policies_loaded_ < absl::Seconds(2)) return;
  absl::StatusOr<std::map<std::string, storage::TenantLimits::Overrides>> overrides =
      tenant_limits_.SchedulingOverrides();
  if (!overrides.ok()) {
    // The scheduler keeps the policies it has; the next tick tries again.
    GANTRY_LOG(ERROR) << "the scheduler cannot read the tenants' policies: " << overrides.status();
    return;
  }
  policies_loaded_ = now;
  std::map<std::string, scheduler::TenantPolicy> policies;
  for (const auto& [tenant, o] : *overrides) {
    const storage::TenantLimits limits = quotas_.defaults().With(o);
    scheduler::TenantPolicy& policy = policies[tenant];
    policy.weight = limits.fair_share_weight;
    for (const auto& [pool, slots] : limits.max_slots_per_pool) {
      policy.max_slots_per_pool[pool] = static_cast<int>(std::min<int64_t>(slots, INT32_MAX));
    }
  }
  absl::Status st;
  {
    absl::MutexLock lock(&state_.mu);
    st = state_.scheduler.SetTenantPolicies(std::move(policies));
  }
  if (!st.ok()) GANTRY_LOG(ERROR) << "tenant policies refused by the scheduler: " << st;
}

void PlacementLoop::ExplainWaits(absl::Time now) {
  // WaitReason looks at every worker, so this runs every 2 s, not every tick.
  if (now - last_explained_ < absl::Seconds(2)) return;
  last_explained_ = now;
  std::vector<std::pair<std::string, std::string>> changed;
  {
    absl::MutexLock lock(&state_.mu);
    for (auto it = wait_reasons_.begin(); it != wait_reasons_.end();) {
      it = state_.queued.count(it->first) ? std::next(it) : wait_reasons_.erase(it);
    }
    for (const std::string& id : state_.queued) {
      std::string reason = state_.scheduler.WaitReason(id);
      if (auto note = state_.pool_notes.find(id);
          note != state_.pool_notes.end() && !reason.empty() && !note->second.empty()) {
        absl::StrAppend(&reason, "; ", note->second);
      }
      if (reason.empty() || wait_reasons_[id] == reason) continue;
      changed.emplace_back(id, std::move(reason));
    }
  }
  for (const auto& [id, reason] : changed) {
    if (jobs_.SetQueuedMessage(id, reason).ok()) wait_reasons_[id] = reason;
  }
}

// ---- queue and placement -------------------------------------------------------------------

void PlacementLoop::SyncQueue(const std::vector<v1::Job>& queued) {
  std::vector<const v1::Job*> fresh;
  {
    absl::MutexLock lock(&state_.mu);
    for (const v1::Job& job : queued) {
      if (!state_.queued.count(job.id()) && !state_.active.count(job.id())) fresh.push_back(&job);
    }
  }
  std::vector<scheduler::JobRequest> requests;
  for (const v1::Job* job : fresh) {
    std::optional<scheduler::JobRequest> request = MakeJobRequest(*job);
    if (request.has_value()) requests.push_back(std::move(*request));
  }
  std::vector<Ending> unschedulable;
  {
    absl::MutexLock lock(&state_.mu);
    for (const scheduler::JobRequest& request : requests) {
      if (absl::Status st = state_.scheduler.Submit(request); !st.ok()) {
        unschedulable.push_back({request.id,
                                 {v1::JOB_STATE_QUEUED},
                                 v1::JOB_STATE_FAILED,
                                 "Unschedulable",
                                 std::string(st.message())});
        continue;
      }
      state_.queued.insert(request.id);
    }
    // Jobs that left QUEUED without being placed (cancelled) leave the scheduler's queue.
    std::set<std::string> still;
    for (const v1::Job& job : queued) still.insert(job.id());
    for (auto it = state_.queued.begin(); it != state_.queued.end();) {
      if (!still.count(*it) && !state_.active.count(*it)) {
        state_.scheduler.Remove(*it);
        it = state_.queued.erase(it);
      } else {
        ++it;
      }
    }
  }
  EndAll(lifecycle_, unschedulable);
}

std::vector<v1::Job> PlacementLoop::HoldOverBudget(std::vector<v1::Job> queued, absl::Time now) {
  budget_gate_.Refresh(now);
  std::vector<v1::Job> admitted;
  std::map<std::string, std::string> holds;
  for (v1::Job& job : queued) {
    std::optional<std::string> why = budget_gate_.Exhausted(job.owner());
    if (!why.has_value()) {
      if (budget_holds_.count(job.id())) {  // released: the scheduler explains the wait from now
        jobs_
            .SetQueuedMessage(job.id(), absl::StrCat("within budget again; waiting for ",
                                                     job.spec().world_size(), " free slots"))
            .IgnoreError();
      }
      admitted.push_back(std::move(job));
      continue;
    }
    auto before = budget_holds_.find(job.id());
    if (before == budget_holds_.end() || before->second != *why) {
      if (!jobs_.SetQueuedMessage(job.id(), *why).ok()) continue;  // retried next tick
      wait_reasons_.erase(job.id());  // explained again once it is admitted
    }
    holds[job.id()] = std::move(*why);
  }
  budget_holds_ = std::move(holds);
  return admitted;
}

std::optional<scheduler::JobRequest> PlacementLoop::MakeJobRequest(const v1::Job& job) {
  absl::StatusOr<scheduler::JobRequest> request = lifecycle_.MakeJobRequest(job);
  if (!request.ok()) {
    lifecycle_.End(job.id(), {v1::JOB_STATE_QUEUED}, v1::JOB_STATE_FAILED, "DatasetMissing",
                   std::string(request.status().message()));
    return std::nullopt;
  }
  return *std::move(request);
}

void PlacementLoop::PlaceJobs(absl::Time now) {
  std::vector<std::pair<scheduler::Placement, std::vector<std::string>>> placements;
  {
    absl::MutexLock lock(&state_.mu);
    const absl::Time pass_start = absl::Now();
    std::vector<scheduler::Placement> decided = state_.scheduler.Schedule(now);
    GetServerMetrics().schedule_seconds.Observe({},
                                                absl::ToDoubleSeconds(absl::Now() - pass_start));
    for (scheduler::Placement& placement : decided) {
      state_.queued.erase(placement.job_id);
      std::vector<std::string> names;
      for (const std::string& w : placement.rank_workers) names.push_back(state_.WorkerName(w));
      placements.emplace_back(std::move(placement), std::move(names));
    }
  }
  for (const auto& [placement, names] : placements) Place(placement, names, now);
}

void PlacementLoop::Place(const scheduler::Placement& placement,
                          const std::vector<std::string>& names, absl::Time now) {
  const std::string where =
      absl::StrCat("ranks 0..", names.size() - 1, " on ", absl::StrJoin(names, ", "),
                   "; rendezvous ", placement.rendezvous_host, ":", placement.rendezvous_port);
  bool again = false;  // a restarting job placed again (no transition: it stays RESTARTING)
  {
    absl::MutexLock lock(&state_.mu);
    auto it = state_.active.find(placement.job_id);
    again = it != state_.active.end() && it->second.phase == JobPhase::kQueued;
  }
  std::optional<v1::Job> started;
  if (!again) {
    started = EnterPlacing(placement, where, now);
    if (!started.has_value()) return;  // cancelled meanwhile; the slots were given back
  }
  ActiveJob placed;
  {
    absl::MutexLock lock(&state_.mu);
    if (again) {
      auto it = state_.active.find(placement.job_id);
      if (it == state_.active.end() || !it->second.PlaceAgain()) {
        state_.scheduler.Remove(placement.job_id);
        return;
      }
    }
    placed = MarkPlaced(placement, again ? nullptr : &*started, now);
  }
  absl::StatusOr<v1::Assignment> common = MakeAssignment(placed, placement);
  if (!common.ok()) {
    lifecycle_.End(placed.id, {v1::JOB_STATE_PLACING, v1::JOB_STATE_RESTARTING},
                   v1::JOB_STATE_FAILED, "PlacementFailed", std::string(common.status().message()));
    return;
  }
  RecordPlacedAttempt(placed, placement, where, again, *common);
  std::optional<std::string> failure;
  {
    absl::MutexLock lock(&state_.mu);
    auto it = state_.active.find(placed.id);
    if (it == state_.active.end() || it->second.attempt != placed.attempt) return;
    failure = SendAssignments(placement, names, placed, *common, it->second);
  }
  if (failure.has_value()) lifecycle_.Fail(placed.id, placed.attempt, WorkerLost(), *failure);
}

std::optional<v1::Job> PlacementLoop::EnterPlacing(const scheduler::Placement& placement,
                                                   const std::string& where, absl::Time now) {
  absl::StatusOr<v1::Job> job = lifecycle_.StartPlacing(placement.job_id, where);
  if (!job.ok()) {  // cancelled meanwhile: give the slots back
    absl::MutexLock lock(&state_.mu);
    state_.scheduler.Remove(placement.job_id);
    return std::nullopt;
  }
  std::optional<v1::Job> started = *std::move(job);
  if (started->attempt() == 0 && started->has_created_at()) {
    const absl::Time created = absl::FromUnixSeconds(started->created_at().seconds()) +
                               absl::Nanoseconds(started->created_at().nanos());
    GetServerMetrics().queue_wait.Observe({}, std::max(0.0, absl::ToDoubleSeconds(now - created)));
  }
  return started;
}

ActiveJob PlacementLoop::MarkPlaced(const scheduler::Placement& placement, const v1::Job* started,
                                    absl::Time now) {
  ActiveJob& a = state_.active[placement.job_id];
  if (started != nullptr) {
    a.id = started->id();
    a.owner = started->owner();
    a.spec = started->spec();
    a.attempt = started->attempt();
  }
  a.leased = true;
  a.rank_workers = placement.rank_workers;
  a.workers.insert(placement.rank_workers.begin(), placement.rank_workers.end());
  a.placed_at = now;
  state_.orphans.erase(a.id);  // read from the database while it was being placed
  return a;
}

void PlacementLoop::RecordPlacedAttempt(const ActiveJob& placed,
                                        const scheduler::Placement& placement,
                                        const std::string& where, bool again,
                                        const v1::Assignment& common) {
  // Which worker runs which rank, for checks after a server restart (hello claims, checkpoint
  // uploads and fetches by worker credential).
  if (absl::Status recorded =
          identities_.RecordPlacement(placed.id, placed.attempt, placement.rank_workers);
      !recorded.ok()) {
    GANTRY_LOG(ERROR) << "cannot record the placement of " + placed.id + " attempt " +
                             std::to_string(placed.attempt) + ": " + recorded.ToString();
  }
  RecordUsageStart(placed, placement);
  if (again) {
    v1::JobEvent event;
    event.mutable_log()->set_rank(-1);
    event.mutable_log()->set_level("INFO");
    event.mutable_log()->set_text(absl::StrCat(
        "attempt ", placed.attempt, " placed: ", where,
        common.resume_checkpoint_sha256().empty()
            ? "; starting from scratch (no checkpoint yet)"
            : absl::StrCat("; resuming from checkpoint ", common.resume_checkpoint_sha256())));
    lifecycle_.AppendEventOrLog(placed.id, event);
  }
}

std::optional<std::string> PlacementLoop::SendAssignments(const scheduler::Placement& placement,
                                                          const std::vector<std::string>& names,
                                                          const ActiveJob& placed,
                                                          const v1::Assignment& common,
                                                          ActiveJob& a) {
  std::optional<std::string> failure;
  for (int rank = 0; rank < static_cast<int>(placement.rank_workers.size()); ++rank) {
    const std::string& worker = placement.rank_workers[rank];
    auto link = state_.links.find(worker);
    if (link == state_.links.end() || link->second->closed()) {
      failure = absl::StrCat("worker ", names[rank], " disconnected during placement");
      break;
    }
    v1::ServerMessage message;
    v1::Assignment* assignment = message.mutable_assignment();
    *assignment = common;
    assignment->set_rank(rank);
    if (placement.rank_workers.size() > 1) {
      assignment->set_rendezvous_secret(credentials_.RendezvousSecret(placed.id, placed.attempt));
    }
    assignment->set_rank_credential(credentials_.RankCredential(placed.id, placed.attempt, worker));
    int threads = a.spec.resources_per_rank().threads();
    if (threads <= 0) {
      auto r = state_.registered.find(worker);
      threads = r == state_.registered.end() ? 0 : r->second.threads_per_rank();
    }
    assignment->set_threads(std::max(threads, 1));
    link->second->Send(std::move(message));
    a.ranks[rank].phase = v1::RANK_PHASE_UNSPECIFIED;
  }
  return failure;
}

void PlacementLoop::RecordUsageStart(const ActiveJob& job, const scheduler::Placement& placement) {
  storage::AttemptUsage usage;
  usage.job_id = job.id;
  usage.attempt = job.attempt;
  usage.owner = job.owner;
  usage.model_name = !job.spec.model_name().empty()     ? job.spec.model_name()
                     : !job.spec.display_name().empty() ? job.spec.display_name()
                                                        : job.id;
  usage.preset = job.spec.model_preset();
  usage.device = job.spec.resources_per_rank().device();
  const bool gpu = usage.device == v1::DEVICE_KIND_GPU;
  usage.devices = static_cast<int>(placement.rank_workers.size()) *
                  (gpu ? std::max(1, job.spec.resources_per_rank().count()) : 1);
  {
    // The pool is the one its workers carry (the scheduler placed the gang within one pool).
    absl::MutexLock lock(&state_.mu);
    if (!placement.rank_workers.empty()) {
      auto it = state_.registered.find(placement.rank_workers[0]);
      if (it != state_.registered.end()) {
        auto label = it->second.labels().find("pool");
        if (label != it->second.labels().end()) usage.pool = label->second;
      }
    }
  }
  if (!usage.pool.empty()) {
    absl::StatusOr<v1::Pool> pool = pools_.Get(usage.pool);
    if (pool.ok()) usage.price_per_device_hour = pool->spec().price_per_device_hour();
  }
  absl::StatusOr<bool> started = costs_.StartAttempt(usage);
  if (!started.ok()) {
    GANTRY_LOG(ERROR) << "cannot record the usage of " << job.id << " attempt " << job.attempt
                      << ": " << started.status();
  }
}

absl::StatusOr<v1::Assignment> PlacementLoop::MakeAssignment(
    const ActiveJob& job, const scheduler::Placement& placement) {
  v1::Assignment a;
  a.set_job_id(job.id);
  *a.mutable_spec() = job.spec;
  a.set_world_size(job.spec.world_size());
  a.set_attempt(job.attempt);
  a.set_collective_timeout_ms(options_.collective_timeout_ms);
  // Every attempt resumes from the newest uploaded checkpoint (read now: a preempted rank may
  // have uploaded one after the restart began).
  ASSIGN_OR_RETURN(v1::Job stored, jobs_.Get("", job.id));
  a.set_resume_checkpoint_sha256(stored.latest_checkpoint().sha256());
  a.set_rendezvous_host(placement.rendezvous_host);
  a.set_rendezvous_port(placement.rendezvous_port);
  a.set_owner(job.owner);
  if (absl::StartsWith(job.spec.dataset(), "ds-")) {
    ASSIGN_OR_RETURN(v1::Dataset ds, datasets_.Get(job.owner, job.spec.dataset()));
    a.set_dataset_sha256(ds.sha256());
  }
  if (absl::StartsWith(job.spec.dataset(), "file://")) {
    // The owner's directories now (an operator may have narrowed them since the submission).
    const FileRoots roots = file_datasets_.RootsOf(job.owner);
    for (const std::string& root : roots.roots()) a.add_file_roots(root);
  }
  if (!job.spec.initial_model().empty()) {
    absl::StatusOr<v1::ModelVersion> parent = models_.Resolve(job.owner, job.spec.initial_model());
    if (!parent.ok()) {
      return absl::Status(parent.status().code(),
                          absl::StrCat("spec.initial_model: ", parent.status().message()));
    }
    a.set_initial_checkpoint_sha256(parent->checkpoint_sha256());
  }
  return a;
}

// ---- lost workers, cancellations, timeouts -------------------------------------------------

void PlacementLoop::ExpireWorkers(absl::Time now) {
  struct Loss {
    std::string worker_id;
    std::vector<std::string> jobs;  // jobs whose ranks died with the worker
    std::vector<Failure> failures;
  };
  std::vector<Loss> losses;
  {
    absl::MutexLock lock(&state_.mu);
    for (const scheduler::LostWorker& lost : state_.scheduler.ExpireLeases(now)) {
      const std::string name = state_.WorkerName(lost.worker_id);
      if (router_ != nullptr) router_->OnDisconnect(lost.worker_id);
      state_.reports.erase(lost.worker_id);
      Loss& loss = losses.emplace_back();
      loss.worker_id = lost.worker_id;
      const std::string why =
          absl::StrCat("worker ", name, " sent no heartbeat for ",
                       options_.lease_timeout_ms / 1000.0, " s; its ranks are lost");
      const std::set<std::string> leased(lost.job_ids.begin(), lost.job_ids.end());
      for (const std::string& job_id : lost.job_ids) {
        auto it = state_.active.find(job_id);
        if (it == state_.active.end()) continue;
        it->second.leased = false;  // the scheduler already released every lease of the job
        loss.failures.push_back({job_id, it->second.attempt, WorkerLost(), why});
        loss.jobs.push_back(job_id);
      }
      // Adopted jobs hold no leases, so the scheduler cannot name them: look them up here.
      for (const auto& [id, job] : state_.active) {
        if (leased.count(id) || job.Ended() || job.leased || job.Queued() ||
            !job.workers.count(lost.worker_id)) {
          continue;
        }
        loss.failures.push_back({id, job.attempt, WorkerLost(), why});
        loss.jobs.push_back(id);
      }
    }
  }
  for (const Loss& loss : losses) {
    workers_.MarkDisconnected(loss.worker_id).IgnoreError();
    // The other ranks are told to stop while the lost worker still counts as running the job.
    FailAll(lifecycle_, loss.failures);
    absl::MutexLock lock(&state_.mu);
    state_.preempting.erase(loss.worker_id);  // a preempted worker that is gone is just gone
    for (const std::string& job_id : loss.jobs) {
      auto it = state_.active.find(job_id);
      if (it != state_.active.end()) it->second.workers.erase(loss.worker_id);
    }
  }
}

void PlacementLoop::HandleCancellations(const std::vector<v1::Job>& cancelling, absl::Time now) {
  std::vector<Ending> endings;
  {
    absl::MutexLock lock(&state_.mu);
    for (const v1::Job& job : cancelling) {
      auto it = state_.active.find(job.id());
      if (it == state_.active.end()) {
        if (state_.orphans.count(job.id())) continue;  // a worker may still claim its ranks
        endings.push_back({job.id(),
                           {v1::JOB_STATE_CANCELLING},
                           v1::JOB_STATE_CANCELLED,
                           "Cancelled",
                           "no ranks were running"});
        continue;
      }
      ActiveJob& a = it->second;
      if (a.Cancel()) {
        state_.SendCancellation(a, job.message());
        a.ended_at = now;
        if (a.Queued()) {  // queued for a restart: nothing of this attempt runs
          state_.scheduler.Remove(a.id);
          state_.queued.erase(a.id);
        }
      }
      const int exited = a.CountRanks(v1::RANK_PHASE_EXITED);
      const bool all_exited = a.Queued() || exited >= job.spec().world_size();
      if (all_exited || now - a.ended_at > options_.rank_exit_grace) {
        endings.push_back(
            {job.id(),
             {v1::JOB_STATE_CANCELLING},
             v1::JOB_STATE_CANCELLED,
             "Cancelled",
             a.Queued()   ? std::string("cancelled while waiting to restart")
             : all_exited ? absl::StrCat("all ", exited, " ranks stopped")
                          : absl::StrCat(exited, " of ", job.spec().world_size(),
                                         " ranks confirmed stopping; the slots are released")});
      }
    }
  }
  EndAll(lifecycle_, endings);
}

void PlacementLoop::ReapEnded(absl::Time now) {
  std::vector<Failure> timeouts;
  {
    absl::MutexLock lock(&state_.mu);
    for (auto it = state_.active.begin(); it != state_.active.end();) {
      const ActiveJob& a = it->second;
      const int exited = a.CountRanks(v1::RANK_PHASE_EXITED);
      const int running = a.CountRanks(v1::RANK_PHASE_RUNNING);
      if (a.phase == JobPhase::kRunning && now - a.placed_at > options_.placing_timeout &&
          running + exited < a.spec.world_size()) {
        timeouts.push_back({a.id, a.attempt, PlacementTimeout(),
                            absl::StrCat("only ", running + exited, " of ", a.spec.world_size(),
                                         " ranks started within ",
                                         absl::FormatDuration(options_.placing_timeout))});
      }
      const bool done = a.Ended() && (a.Queued() || exited >= a.spec.world_size() ||
                                      now - a.ended_at > options_.rank_exit_grace);
      if (done) {
        state_.scheduler.Remove(a.id);
        state_.queued.erase(a.id);
        it = state_.active.erase(it);
      } else {
        ++it;
      }
    }
  }
  FailAll(lifecycle_, timeouts);
}

void PlacementLoop::WatchProgress(absl::Time now) {
  std::vector<Failure> hung;
  {
    absl::MutexLock lock(&state_.mu);
    for (const auto& [id, a] : state_.active) {
      if (a.phase != JobPhase::kRunning || a.running_since == absl::InfinitePast()) {
        continue;
      }
      const absl::Time last = std::max(a.running_since, a.latest_step_at);
      const double median = a.MedianStepSeconds();
      const absl::Duration limit =
          std::max(options_.hang_timeout, absl::Seconds(options_.hang_step_factor * median));
      if (now - last <= limit) continue;
      hung.push_back(
          {id, a.attempt, NoProgress(),
           absl::StrFormat("no training step for %s (rank 0 last reported step %d; the limit is "
                           "max(%s, %g x the median step time %.3g s))",
                           absl::FormatDuration(absl::Trunc(now - last, absl::Seconds(1))),
                           a.latest_step, absl::FormatDuration(options_.hang_timeout),
                           options_.hang_step_factor, median)});
    }
  }
  FailAll(lifecycle_, hung);
}

}  // namespace gantry::server
