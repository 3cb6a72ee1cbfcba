#include "server/coordinator/worker_sessions.h"

#include <algorithm>
#include <iostream>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/failure_policy.h"
#include "base/log.h"
#include "base/safe_text.h"
#include "base/status_macros.h"
#include "server/platform/server_metrics.h"
#include "server/requests/field_checks.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

const std::vector<v1::JobState> kLive = {v1::JOB_STATE_PLACING, v1::JOB_STATE_RUNNING,
                                         v1::JOB_STATE_RESTARTING};

std::string DescribeExit(int code) {
  if (code < 0) return absl::StrCat("was killed by signal ", -code);
  return absl::StrCat("exited with code ", DescribeExitCode(code));
}

absl::Status NotOnWorker(const std::string& job_id, const std::string& worker_id) {
  return absl::FailedPreconditionError(
      absl::StrCat("job ", job_id, " has no ranks on worker ", worker_id));
}

v1::JobEvent LogEvent(int rank, const std::string& level, const std::string& text) {
  v1::JobEvent event;
  event.mutable_log()->set_rank(rank);
  event.mutable_log()->set_level(level);
  event.mutable_log()->set_text(text);
  return event;
}

}  // namespace

void WorkerSessions::OnRegister(const std::string& worker_id, const v1::RegisterRequest& request,
                                bool drained) {
  absl::MutexLock lock(&state_.mu);
  state_.registered[worker_id] = request;
  state_.preempting.erase(worker_id);  // a new daemon (a preempted one exits)
  state_.reports.erase(worker_id);     // its next heartbeat says what it has now
  if (drained) {
    state_.drained.insert(worker_id);
  } else {
    state_.drained.erase(worker_id);
  }
  if (router_ != nullptr) router_->OnRegister(worker_id, request);
}

void WorkerSessions::OnPreempting(const std::string& worker_id, const v1::Preempting& notice) {
  std::vector<std::pair<std::string, v1::JobEvent>> events;
  {
    absl::MutexLock lock(&state_.mu);
    state_.preempting.insert(worker_id);
    state_.scheduler.SetDraining(worker_id, true);
    const std::string text =
        absl::StrCat("worker ", state_.WorkerName(worker_id), " is being preempted",
                     notice.reason().empty() ? "" : absl::StrCat(" (", notice.reason(), ")"),
                     "; its ranks checkpoint within ", notice.grace_ms() / 1000.0,
                     " s and the job restarts elsewhere");
    for (const auto& [id, job] : state_.active) {
      if (!job.Ended() && job.workers.count(worker_id)) {
        events.emplace_back(id, LogEvent(-1, "WARNING", text));
      }
    }
  }
  for (const auto& [job_id, event] : events) lifecycle_.AppendEventOrLog(job_id, event);
}

int WorkerSessions::Drain(const std::string& worker_id, bool drain) {
  absl::MutexLock lock(&state_.mu);
  if (drain) {
    state_.drained.insert(worker_id);
  } else {
    state_.drained.erase(worker_id);
  }
  state_.scheduler.SetDraining(worker_id, state_.Draining(worker_id));
  if (!drain) return 0;
  int jobs = 0;
  for (const auto& [id, job] : state_.active) {
    if (job.Stopping() || job.Queued() || !job.workers.count(worker_id)) continue;
    state_.SendCheckpointAndStop(job, worker_id, "the worker is drained by an operator");
    ++jobs;
  }
  return jobs;
}

bool WorkerSessions::Drained(const std::string& worker_id) const {
  absl::MutexLock lock(&state_.mu);
  return state_.drained.count(worker_id) > 0;
}

bool WorkerSessions::Draining(const std::string& worker_id) const {
  absl::MutexLock lock(&state_.mu);
  return state_.Draining(worker_id);
}

bool WorkerSessions::Connected(const std::string& worker_id) const {
  absl::MutexLock lock(&state_.mu);
  auto it = state_.links.find(worker_id);
  return it != state_.links.end() && !it->second->closed();
}

std::shared_ptr<WorkerLink> WorkerSessions::OnConnect(const std::string& worker_id,
                                                      const v1::Hello& hello) {
  const bool known_jobs = lifecycle_.LoadOrphans();
  // Where each claimed job was placed, by (attempt, rank), read before taking the lock.
  std::map<std::string, std::map<std::pair<int, int>, std::string>> placements;
  for (const std::string& job_id : hello.running_jobs()) {
    absl::StatusOr<std::map<std::pair<int, int>, std::string>> placed =
        identities_.PlacementOf(job_id);
    if (placed.ok()) placements[job_id] = *std::move(placed);
  }
  auto placed_here = [&](const std::string& job_id, int attempt) {
    std::map<int, std::string> ranks;  // of `attempt`; attempt < 0: any attempt
    bool here = false;
    auto it = placements.find(job_id);
    if (it == placements.end()) return std::make_pair(here, ranks);
    for (const auto& [key, worker] : it->second) {
      if (worker == worker_id) here = true;
      if (key.first == attempt) ranks[key.second] = worker;
    }
    return std::make_pair(here, ranks);
  };
  auto link = std::make_shared<WorkerLink>(worker_id);
  std::vector<std::pair<std::string, v1::JobEvent>> adopted;
  {
    absl::MutexLock lock(&state_.mu);
    auto old = state_.links.find(worker_id);
    if (old != state_.links.end()) old->second->Close();
    state_.links[worker_id] = link;
    if (router_ != nullptr) router_->OnConnect(worker_id);
    UpsertScheduledWorker(worker_id, hello);
    for (const std::string& job_id : hello.running_jobs()) {
      auto active = state_.active.find(job_id);
      if (active != state_.active.end()) {
        ActiveJob& a = active->second;
        if (!a.workers.count(worker_id) && !placed_here(job_id, -1).first) {
          GANTRY_LOG(WARNING) << "worker " << state_.WorkerName(worker_id) << " claims job "
                              << BoundedField(job_id) << ", which was never placed on it; ignored";
          continue;
        }
        a.workers.insert(worker_id);
        // Ranks of an earlier attempt on a worker that was away when the job restarted (the
        // cancellation then had nowhere to go): the current attempt has no rank here, so stop them.
        const bool current_here = std::find(a.rank_workers.begin(), a.rank_workers.end(),
                                            worker_id) != a.rank_workers.end();
        if (a.Queued() || (!a.rank_workers.empty() && !current_here)) {
          v1::ServerMessage cancel;
          cancel.mutable_cancellation()->set_job_id(job_id);
          cancel.mutable_cancellation()->set_reason(absl::StrCat(
              "the job restarted as attempt ", a.attempt, "; the ranks of earlier attempts stop"));
          link->Send(std::move(cancel));
        }
        continue;
      }
      auto orphan = state_.orphans.find(job_id);
      if (orphan != state_.orphans.end() && orphan->second.state() == v1::JOB_STATE_RESTARTING) {
        // A restart was under way when the server stopped: these ranks are an earlier attempt's
        // (or the new attempt's, still starting). Stop them; the orphan stays unclaimed and is
        // queued again after the lease timeout (PlacementLoop::EndUnclaimedOrphans).
        v1::ServerMessage cancel;
        cancel.mutable_cancellation()->set_job_id(job_id);
        cancel.mutable_cancellation()->set_reason(
            "the job was restarting when the server stopped; its gang is placed again");
        link->Send(std::move(cancel));
        continue;
      }
      if (orphan != state_.orphans.end()) {
        const auto [here, ranks] = placed_here(job_id, orphan->second.attempt());
        if (!here) {
          GANTRY_LOG(WARNING) << "worker " << state_.WorkerName(worker_id) << " claims job "
                              << BoundedField(job_id)
                              << ", which is not recorded as placed on it; not adopted";
          continue;
        }
        adopted.emplace_back(job_id, AdoptOrphan(worker_id, orphan->second, ranks));
        state_.orphans.erase(orphan);
        continue;
      }
      // Not a job this server runs (finished, cancelled or unknown): stop its ranks. Without the
      // database's list of active jobs nothing is cancelled (the hello is repeated on reconnect).
      if (!known_jobs) continue;
      v1::ServerMessage cancel;
      cancel.mutable_cancellation()->set_job_id(job_id);
      cancel.mutable_cancellation()->set_reason("the server does not run this job any more");
      link->Send(std::move(cancel));
    }
  }
  for (const auto& [job_id, event] : adopted) lifecycle_.AppendEventOrLog(job_id, event);
  return link;
}

void WorkerSessions::UpsertScheduledWorker(const std::string& worker_id, const v1::Hello& hello) {
  auto r = state_.registered.find(worker_id);
  if (r == state_.registered.end()) return;
  const v1::RegisterRequest& reg = r->second;
  scheduler::WorkerState w;
  w.id = worker_id;
  w.name = reg.name();
  w.slots = reg.slots();
  w.device = reg.device();  // the scheduler normalises UNSPECIFIED to CPU
  w.labels.insert(reg.labels().begin(), reg.labels().end());
  w.host = reg.advertise_host();
  if (reg.rendezvous_port_min() > 0) {
    w.port_min = reg.rendezvous_port_min();
    w.port_max = reg.rendezvous_port_max();
  }
  w.cached_datasets.insert(reg.cached_datasets().begin(), reg.cached_datasets().end());
  state_.scheduler.UpsertWorker(w, state_.Now());
  state_.scheduler.SetDraining(worker_id, state_.Draining(worker_id));
  // Ranks from before a reconnect occupy slots the scheduler holds no lease for: nothing is
  // placed on the worker until its first heartbeat says what is free.
  if (!hello.running_jobs().empty()) {
    state_.scheduler.Heartbeat(worker_id, 0, w.cached_datasets, state_.Now()).IgnoreError();
  }
}

v1::JobEvent WorkerSessions::AdoptOrphan(const std::string& worker_id, const v1::Job& orphan,
                                         const std::map<int, std::string>& placement) {
  ActiveJob& a = state_.active[orphan.id()];
  a.id = orphan.id();
  a.owner = orphan.owner();
  a.spec = orphan.spec();
  a.attempt = orphan.attempt();
  a.workers.insert(worker_id);
  if (a.rank_workers.empty() && !placement.empty() &&
      static_cast<int>(placement.size()) == a.spec.world_size() &&
      placement.rbegin()->first == a.spec.world_size() - 1) {
    for (const auto& [rank, worker] : placement) a.rank_workers.push_back(worker);
  }
  a.placed_at = state_.Now();
  a.leased = false;
  for (int rank = 0; rank < a.spec.world_size(); ++rank) {
    a.ranks[rank].phase = orphan.state() == v1::JOB_STATE_RUNNING ? v1::RANK_PHASE_RUNNING
                                                                  : v1::RANK_PHASE_UNSPECIFIED;
  }
  if (orphan.state() == v1::JOB_STATE_RUNNING) a.running_since = state_.Now();
  return LogEvent(
      -1, "INFO",
      absl::StrCat("adopted after a server restart: worker ", worker_id, " runs ranks of it"));
}

void WorkerSessions::OnDisconnect(const std::shared_ptr<WorkerLink>& link) {
  absl::MutexLock lock(&state_.mu);
  link->Close();
  auto it = state_.links.find(link->worker_id());
  if (it != state_.links.end() && it->second == link) {
    state_.links.erase(it);
    state_.scheduler.MarkDisconnected(link->worker_id());
    state_.reports.erase(link->worker_id());
    if (router_ != nullptr) router_->OnDisconnect(link->worker_id());
  }
}

std::map<std::string, WorkerReport> WorkerSessions::Reports() const {
  absl::MutexLock lock(&state_.mu);
  return state_.reports;
}

std::string WorkerSessions::WorkerNameOf(const std::string& worker_id) const {
  absl::MutexLock lock(&state_.mu);
  return state_.WorkerName(worker_id);
}

absl::Status WorkerSessions::OnHeartbeat(const std::string& worker_id,
                                         const v1::Heartbeat& heartbeat) {
  absl::MutexLock lock(&state_.mu);
  if (router_ != nullptr) router_->OnHeartbeat(worker_id, heartbeat);
  WorkerReport& report = state_.reports[worker_id];
  report.heartbeat = heartbeat;
  report.heartbeat.clear_cached_datasets();  // not shown; can be long
  report.at = state_.Now();
  std::set<std::string> cached(heartbeat.cached_datasets().begin(),
                               heartbeat.cached_datasets().end());
  return state_.scheduler.Heartbeat(worker_id, heartbeat.free_slots(), cached, state_.Now());
}

absl::Status WorkerSessions::OnWorkerMessage(const std::string& worker_id,
                                             const v1::WorkerMessage& m) {
  if (m.has_preempting()) {
    OnPreempting(worker_id, m.preempting());
    return absl::OkStatus();
  }
  if (m.job_id().empty()) {
    return checks::Invalid("job_id", "is missing on a job message");
  }
  bool current = true;  // of the job's current attempt
  {
    absl::MutexLock lock(&state_.mu);
    auto it = state_.active.find(m.job_id());
    if (it == state_.active.end() || !it->second.workers.count(worker_id)) {
      return NotOnWorker(m.job_id(), worker_id);
    }
    const ActiveJob& a = it->second;
    current = m.attempt() == a.attempt && !a.Queued();
    // A worker speaks only for the ranks of the current attempt placed on it.
    int rank = -1;
    if (m.has_rank_status()) rank = m.rank_status().rank();
    if (m.has_log()) rank = m.log().rank();
    if (m.has_progress() || m.has_result()) rank = 0;
    if (current && rank >= 0 && !a.rank_workers.empty() &&
        (rank >= static_cast<int>(a.rank_workers.size()) || a.rank_workers[rank] != worker_id)) {
      return absl::PermissionDeniedError(absl::StrCat("rank ", rank, " of job ", m.job_id(),
                                                      " attempt ", m.attempt(),
                                                      " was not placed on worker ", worker_id));
    }
  }
  if (!current) {
    // A rank of an earlier attempt (stopping after a restart): its log lines and exit are
    // recorded, nothing else.
    if (m.has_log()) {
      v1::JobEvent event;
      *event.mutable_log() = m.log();
      return jobs_.AppendEvent(m.job_id(), event).status();
    }
    if (m.has_rank_status() && m.rank_status().phase() == v1::RANK_PHASE_EXITED) {
      lifecycle_.AppendEventOrLog(
          m.job_id(), LogEvent(m.rank_status().rank(), "INFO",
                               absl::StrCat("rank ", m.rank_status().rank(), " of attempt ",
                                            m.attempt(), " on ", WorkerNameOf(worker_id), " ",
                                            DescribeExit(m.rank_status().exit_code()))));
    }
    return absl::OkStatus();
  }
  switch (m.kind_case()) {
    case v1::WorkerMessage::kRankStatus:
      return HandleRankStatus(worker_id, m.job_id(), m.rank_status());
    case v1::WorkerMessage::kProgress:
      return HandleProgress(m.job_id(), m.progress());
    case v1::WorkerMessage::kLog: {
      v1::JobEvent event;
      *event.mutable_log() = m.log();
      return jobs_.AppendEvent(m.job_id(), event).status();
    }
    case v1::WorkerMessage::kResult:
      return HandleResult(m.job_id(), m.result());
    default:
      return absl::InvalidArgumentError(
          "kind: a job message must be rank_status, progress, "
          "log or result");
  }
}

absl::Status WorkerSessions::HandleRankStatus(const std::string& worker_id,
                                              const std::string& job_id,
                                              const v1::RankStatus& status) {
  // Under the lock: record the rank's phase and decide what to write.
  int all_running = 0;  // > 0: every rank runs, the job becomes RUNNING
  int attempt = 0;
  std::optional<v1::JobEvent> exited;  // the log line about an exited rank
  std::optional<std::string> fail_why;
  FailureClass failure;
  {
    absl::MutexLock lock(&state_.mu);
    auto it = state_.active.find(job_id);
    if (it == state_.active.end()) return NotOnWorker(job_id, worker_id);
    ActiveJob& a = it->second;
    attempt = a.attempt;
    if (status.rank() < 0 || status.rank() >= a.spec.world_size()) {
      return checks::Invalid("rank_status.rank", absl::StrCat(status.rank(), " is outside 0..",
                                                              a.spec.world_size() - 1));
    }
    RankState& rank = a.ranks[status.rank()];
    rank.phase = status.phase();
    rank.exit_code = status.exit_code();
    rank.message = status.message();
    const std::string worker = state_.WorkerName(worker_id);
    if (status.phase() == v1::RANK_PHASE_RUNNING && !a.Ended()) {
      const int running = a.CountRanks(v1::RANK_PHASE_RUNNING);
      if (running == a.spec.world_size()) {
        all_running = running;
        a.running_since = state_.Now();
        if (a.placed_at != absl::Time()) {
          GetServerMetrics().gang_start_seconds.Observe(
              {}, absl::ToDoubleSeconds(a.running_since - a.placed_at));
        }
      }
    }
    if (status.phase() == v1::RANK_PHASE_EXITED) {
      const std::string detail =
          status.message().empty() ? "" : absl::StrCat(": ", status.message());
      exited = LogEvent(status.rank(), status.exit_code() == 0 ? "INFO" : "ERROR",
                        absl::StrCat("rank ", status.rank(), " on ", worker, " ",
                                     DescribeExit(status.exit_code()), detail));
      if (!a.Stopping() && (status.exit_code() != 0 || status.rank() == 0)) {
        if (status.exit_code() != 0) {
          fail_why = absl::StrCat("rank ", status.rank(), " on worker ", worker, " ",
                                  DescribeExit(status.exit_code()), detail);
          failure = ClassifyRankExit(status.exit_code());
        } else {
          fail_why = "rank 0 exited without reporting a result";
          failure = ClassifyRankExit(kExitInternal);
        }
      }
    }
  }
  // Without it: the writes.
  if (all_running > 0) lifecycle_.StartRunning(job_id, attempt, all_running);
  if (exited.has_value()) lifecycle_.AppendEventOrLog(job_id, *exited);
  if (fail_why.has_value()) lifecycle_.Fail(job_id, attempt, failure, *fail_why);
  return absl::OkStatus();
}

absl::Status WorkerSessions::HandleProgress(const std::string& job_id,
                                            const v1::Progress& progress) {
  RETURN_IF_ERROR(jobs_.UpdateProgress(job_id, progress));
  const absl::Time now = state_.Now();
  {
    absl::MutexLock lock(&state_.mu);
    auto it = state_.active.find(job_id);
    if (it == state_.active.end()) return absl::OkStatus();  // reaped meanwhile
    ActiveJob& a = it->second;
    if (progress.step() > a.latest_step) {
      if (a.latest_step >= 0 && a.latest_step_at != absl::InfinitePast()) {
        const double seconds = absl::ToDoubleSeconds(now - a.latest_step_at) /
                               static_cast<double>(progress.step() - a.latest_step);
        if (a.step_seconds.size() >= 16) a.step_seconds.erase(a.step_seconds.begin());
        a.step_seconds.push_back(seconds);
      }
      a.latest_step = progress.step();
      a.latest_step_at = now;
    }
    // An event only when training moved on (rank 0 repeats its report while a step runs).
    const bool moved =
        progress.step() != a.last_progress_step || progress.epoch() != a.last_progress_epoch;
    if (!moved || now - a.last_progress_event < progress_event_interval_) {
      return absl::OkStatus();
    }
    a.last_progress_event = now;
    a.last_progress_step = progress.step();
    a.last_progress_epoch = progress.epoch();
  }
  v1::JobEvent event;
  *event.mutable_progress() = progress;
  return jobs_.AppendEvent(job_id, event).status();
}

absl::Status WorkerSessions::HandleResult(const std::string& job_id, const v1::JobResult& result) {
  std::string owner;
  v1::JobSpec spec;
  int attempt = 0;
  {
    absl::MutexLock lock(&state_.mu);
    auto it = state_.active.find(job_id);
    if (it == state_.active.end() || it->second.Ended()) {
      return absl::OkStatus();  // a re-sent result after a reconnect
    }
    owner = it->second.owner;
    spec = it->second.spec;
    attempt = it->second.attempt;
  }
  if (!result.success()) {
    const std::string why =
        result.message().empty() ? "rank 0 reported a failure" : result.message();
    if (result.exit_code() == 0) {  // a worker that does not say which failure it was
      lifecycle_.End(job_id, kLive, v1::JOB_STATE_FAILED, "TrainingFailed", why);
    } else {
      lifecycle_.Fail(job_id, attempt, ClassifyRankExit(result.exit_code()), why);
    }
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(v1::Job job, jobs_.Get("", job_id));
  std::string model_ref = job.model_ref();
  if (model_ref.empty()) {
    absl::StatusOr<std::string> registered = registrar_.Register(job_id, owner, spec, result);
    // The database is out: the worker's inbox keeps the result and retries it.
    if (absl::IsUnavailable(registered.status())) return registered.status();
    if (!registered.ok()) {
      lifecycle_.End(
          job_id, kLive, v1::JOB_STATE_FAILED, "RegistrationFailed",
          absl::StrCat("the model could not be registered: ", registered.status().message()));
      return absl::OkStatus();
    }
    model_ref = *registered;
  }
  lifecycle_.End(job_id, kLive, v1::JOB_STATE_SUCCEEDED, "Succeeded",
                 absl::StrCat("trained, validated and registered as ", model_ref));
  return absl::OkStatus();
}

}  // namespace gantry::server
