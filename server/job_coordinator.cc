#include "server/job_coordinator.h"

#include <algorithm>
#include <iostream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "server/validation.h"
#include "showers/toy_mc.h"
#include "storage/job_repository.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

absl::Time TimeOf(const google::protobuf::Timestamp& ts) {
  return absl::FromUnixSeconds(ts.seconds()) + absl::Nanoseconds(ts.nanos());
}

v1::DeviceKind DeviceOf(v1::DeviceKind kind) {
  return kind == v1::DEVICE_KIND_GPU ? v1::DEVICE_KIND_GPU : v1::DEVICE_KIND_CPU;
}

std::string DescribeExit(int code) {
  if (code < 0) return absl::StrCat("was killed by signal ", -code);
  return absl::StrCat("exited with code ", code);
}

// The name a job's model is registered under: spec.model_name, else a display name that is a valid
// model name, else the job id.
std::string ModelNameOf(const std::string& job_id, const v1::JobSpec& spec) {
  if (!spec.model_name().empty()) return spec.model_name();
  if (ValidateModelName(spec.display_name(), "display_name").ok()) return spec.display_name();
  return job_id;
}

std::map<std::string, std::string> HyperParameterMap(const v1::JobSpec& spec) {
  const v1::HyperParameters& h = spec.hyper_parameters();
  std::map<std::string, std::string> m;
  m["epochs"] = absl::StrCat(h.epochs());
  m["batch_per_rank"] = absl::StrCat(h.batch_per_rank());
  m["learning_rate"] = absl::StrCat(h.learning_rate());
  m["optimizer"] = h.optimizer().empty() ? "rmsprop" : h.optimizer();
  m["seed"] = absl::StrCat(h.seed());
  m["scale_lr_with_world_size"] = h.scale_lr_with_world_size() ? "true" : "false";
  m["warmup_epochs"] = absl::StrCat(h.warmup_epochs());
  m["label_flip_probability"] = absl::StrCat(h.label_flip_probability());
  m["generator_steps_per_discriminator_step"] =
      absl::StrCat(h.generator_steps_per_discriminator_step());
  if (h.has_loss_weights()) {
    const v1::LossWeights& w = h.loss_weights();
    m["loss_weights"] =
        absl::StrCat(w.adversarial(), ",", w.energy(), ",", w.angle(), ",", w.ecal_sum());
  }
  return m;
}

}  // namespace

bool WorkerLink::Send(v1::ServerMessage message) {
  absl::MutexLock lock(&mu_);
  if (closed_) return false;
  queue_.push_back(std::move(message));
  return true;
}

std::optional<v1::ServerMessage> WorkerLink::Next(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return closed_ || !queue_.empty(); };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (queue_.empty()) return std::nullopt;
  v1::ServerMessage m = std::move(queue_.front());
  queue_.pop_front();
  return m;
}

void WorkerLink::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

bool WorkerLink::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

JobCoordinator::JobCoordinator(Backend& backend, GenerationRouter* router)
    : backend_(backend),
      router_(router),
      scheduler_(
          scheduler::SchedulerOptions{absl::Milliseconds(backend.options.lease_timeout_ms)}) {}

JobCoordinator::~JobCoordinator() { Stop(); }

void JobCoordinator::Start() {
  {
    absl::MutexLock lock(&mu_);
    started_at_ = absl::Now();
  }
  thread_ = std::thread([this] { Loop(); });
}

void JobCoordinator::Stop() {
  {
    absl::MutexLock lock(&loop_mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void JobCoordinator::Loop() {
  while (true) {
    {
      absl::MutexLock lock(&loop_mu_);
      auto stopped = [this]() ABSL_SHARED_LOCKS_REQUIRED(loop_mu_) { return stop_; };
      loop_mu_.AwaitWithTimeout(absl::Condition(&stopped), backend_.options.scheduler_tick);
      if (stop_) return;
    }
    Tick(absl::Now());
  }
}

void JobCoordinator::Tick(absl::Time now) {
  absl::MutexLock lock(&mu_);
  AdoptOrphans(now);
  // One query a tick for the jobs the database drives: new QUEUED ones, CANCELLING ones.
  absl::StatusOr<std::vector<v1::Job>> jobs =
      backend_.jobs->ListByState({v1::QUEUED, v1::CANCELLING});
  if (!jobs.ok()) {
    std::cerr << "gantry-server: the scheduler cannot list jobs: " << jobs.status() << "\n";
  } else {
    std::vector<v1::Job> queued, cancelling;
    for (v1::Job& job : *jobs)
      (job.state() == v1::QUEUED ? queued : cancelling).push_back(std::move(job));
    SyncQueue(queued);
    HandleCancellations(cancelling, now);
  }
  ExpireWorkers(now);
  PlaceJobs(now);
  ReapEnded(now);
  ExplainWaits(now);
}

void JobCoordinator::ExplainWaits(absl::Time now) {
  // WaitReason looks at every worker, so this runs every 2 s, not every tick.
  if (now - last_explained_ < absl::Seconds(2)) return;
  last_explained_ = now;
  for (auto it = wait_reasons_.begin(); it != wait_reasons_.end();) {
    it = queued_.count(it->first) ? std::next(it) : wait_reasons_.erase(it);
  }
  for (const std::string& id : queued_) {
    const std::string reason = scheduler_.WaitReason(id);
    if (reason.empty() || wait_reasons_[id] == reason) continue;
    if (backend_.jobs->SetQueuedMessage(id, reason).ok()) wait_reasons_[id] = reason;
  }
}

void JobCoordinator::AppendEventOrLog(const std::string& job_id, const v1::JobEvent& event) {
  absl::StatusOr<int64_t> seq = backend_.jobs->AppendEvent(job_id, event);
  if (!seq.ok()) {
    std::cerr << "gantry-server: cannot record an event of " << job_id << ": " << seq.status()
              << "\n";
  }
}

// ---- queue and placement -------------------------------------------------------------------

void JobCoordinator::SyncQueue(const std::vector<v1::Job>& queued) {
  std::set<std::string> still;
  for (const v1::Job& job : queued) {
    still.insert(job.id());
    if (queued_.count(job.id()) || active_.count(job.id())) continue;
    scheduler::JobRequest request;
    request.id = job.id();
    request.priority = job.spec().priority();
    request.submitted = TimeOf(job.created_at());
    request.world_size = job.spec().world_size();
    request.device = DeviceOf(job.spec().resources_per_rank().device());
    request.selector.insert(job.spec().worker_selector().begin(),
                            job.spec().worker_selector().end());
    if (absl::StartsWith(job.spec().dataset(), "ds-")) {
      absl::StatusOr<v1::Dataset> ds = backend_.datasets->Get(job.owner(), job.spec().dataset());
      if (!ds.ok()) {
        EndJob(job.id(), {v1::QUEUED}, v1::FAILED, "DatasetMissing",
               absl::StrCat("dataset ", job.spec().dataset(), " is gone: ", ds.status().message()));
        continue;
      }
      request.dataset_key = ds->sha256();
    } else if (absl::StartsWith(job.spec().dataset(), "toymc:")) {
      // A worker caches a simulated set under the sha256 of its canonical spec (workers/runner).
      absl::StatusOr<showers::ToyMcConfig> toy = showers::ParseToyMcSpec(job.spec().dataset());
      if (toy.ok()) request.dataset_key = Sha256Hex(showers::FormatToyMcSpec(*toy));
    }
    if (absl::Status st = scheduler_.Submit(request); !st.ok()) {
      EndJob(job.id(), {v1::QUEUED}, v1::FAILED, "Unschedulable", std::string(st.message()));
      continue;
    }
    queued_.insert(job.id());
  }
  // Jobs that left QUEUED without being placed (cancelled) leave the scheduler's queue.
  for (auto it = queued_.begin(); it != queued_.end();) {
    if (!still.count(*it) && !active_.count(*it)) {
      scheduler_.Remove(*it);
      it = queued_.erase(it);
    } else {
      ++it;
    }
  }
}

void JobCoordinator::PlaceJobs(absl::Time now) {
  for (const scheduler::Placement& placement : scheduler_.Schedule(now)) {
    queued_.erase(placement.job_id);
    std::vector<std::string> names;
    for (const std::string& w : placement.rank_workers) {
      auto r = registered_.find(w);
      names.push_back(r == registered_.end() ? w : r->second.name());
    }
    absl::StatusOr<v1::Job> job = backend_.jobs->Transition(
        placement.job_id, {v1::QUEUED}, v1::PLACING, "Placed",
        absl::StrCat("ranks 0..", names.size() - 1, " on ", absl::StrJoin(names, ", "),
                     "; rendezvous ", placement.rendezvous_host, ":", placement.rendezvous_port));
    if (!job.ok()) {  // cancelled meanwhile: give the slots back
      scheduler_.Remove(placement.job_id);
      continue;
    }
    ActiveJob& a = active_[job->id()];
    a.id = job->id();
    a.owner = job->owner();
    a.spec = job->spec();
    a.rank_workers = placement.rank_workers;
    a.workers.insert(placement.rank_workers.begin(), placement.rank_workers.end());
    a.placed_at = now;
    absl::StatusOr<v1::Assignment> common = MakeAssignment(a, placement);
    if (!common.ok()) {
      EndJob(a.id, {v1::PLACING}, v1::FAILED, "PlacementFailed",
             std::string(common.status().message()));
      continue;
    }
    for (int rank = 0; rank < static_cast<int>(placement.rank_workers.size()); ++rank) {
      const std::string& worker = placement.rank_workers[rank];
      auto link = links_.find(worker);
      if (link == links_.end() || link->second->closed()) {
        EndJob(a.id, {v1::PLACING}, v1::FAILED, "PlacementFailed",
               absl::StrCat("worker ", names[rank], " disconnected during placement"));
        break;
      }
      v1::ServerMessage message;
      v1::Assignment* assignment = message.mutable_assignment();
      *assignment = *common;
      assignment->set_rank(rank);
      int threads = a.spec.resources_per_rank().threads();
      if (threads <= 0) {
        auto r = registered_.find(worker);
        threads = r == registered_.end() ? 0 : r->second.threads_per_rank();
      }
      assignment->set_threads(std::max(threads, 1));
      link->second->Send(std::move(message));
      a.ranks[rank].phase = v1::RANK_PHASE_UNSPECIFIED;
    }
  }
}

absl::StatusOr<v1::Assignment> JobCoordinator::MakeAssignment(
    const ActiveJob& job, const scheduler::Placement& placement) {
  v1::Assignment a;
  a.set_job_id(job.id);
  *a.mutable_spec() = job.spec;
  a.set_world_size(job.spec.world_size());
  a.set_rendezvous_host(placement.rendezvous_host);
  a.set_rendezvous_port(placement.rendezvous_port);
  a.set_owner(job.owner);
  if (absl::StartsWith(job.spec.dataset(), "ds-")) {
    ASSIGN_OR_RETURN(v1::Dataset ds, backend_.datasets->Get(job.owner, job.spec.dataset()));
    a.set_dataset_sha256(ds.sha256());
  }
  if (!job.spec.initial_model().empty()) {
    absl::StatusOr<v1::ModelVersion> parent =
        backend_.models->Resolve(job.owner, job.spec.initial_model());
    if (!parent.ok()) {
      return absl::Status(parent.status().code(),
                          absl::StrCat("spec.initial_model: ", parent.status().message()));
    }
    a.set_initial_checkpoint_sha256(parent->checkpoint_sha256());
  }
  return a;
}

// ---- ending jobs ---------------------------------------------------------------------------

void JobCoordinator::SendCancellation(const ActiveJob& job, const std::string& reason) {
  for (const std::string& worker : job.workers) {
    auto link = links_.find(worker);
    if (link == links_.end()) continue;
    v1::ServerMessage message;
    message.mutable_cancellation()->set_job_id(job.id);
    message.mutable_cancellation()->set_reason(reason);
    link->second->Send(std::move(message));
  }
}

void JobCoordinator::EndJob(const std::string& job_id, const std::vector<v1::JobState>& from,
                            v1::JobState to, const std::string& reason,
                            const std::string& message) {
  absl::StatusOr<v1::Job> job = backend_.jobs->Transition(job_id, from, to, reason, message);
  if (!job.ok() && job.status().code() != absl::StatusCode::kFailedPrecondition) {
    std::cerr << "gantry-server: cannot end " << job_id << ": " << job.status() << "\n";
    return;  // retried by the next tick's timeouts
  }
  auto it = active_.find(job_id);
  if (it == active_.end()) return;
  absl::StatusOr<v1::Job> now_job = job.ok() ? job : backend_.jobs->Get("", job_id);
  if (now_job.ok() && storage::IsTerminalJobState(now_job->state()) && !it->second.ended) {
    it->second.ended = true;
    it->second.ended_at = absl::Now();
    if (now_job->state() != v1::SUCCEEDED) SendCancellation(it->second, message);
  }
}

void JobCoordinator::ExpireWorkers(absl::Time now) {
  for (const scheduler::LostWorker& lost : scheduler_.ExpireLeases(now)) {
    auto r = registered_.find(lost.worker_id);
    const std::string name = r == registered_.end() ? lost.worker_id : r->second.name();
    backend_.workers->MarkDisconnected(lost.worker_id).IgnoreError();
    if (router_ != nullptr) router_->OnDisconnect(lost.worker_id);
    for (const std::string& job_id : lost.job_ids) {
      EndJob(job_id, {v1::PLACING, v1::RUNNING, v1::RESTARTING, v1::CANCELLING}, v1::FAILED,
             "WorkerLost",
             absl::StrCat("worker ", name, " sent no heartbeat for ",
                          backend_.options.lease_timeout_ms / 1000.0,
                          " s; its ranks are lost (restarts from checkpoints are not supported "
                          "yet: resubmit the job)"));
      auto it = active_.find(job_id);
      if (it != active_.end()) {
        it->second.leased = false;  // the scheduler already released every lease of the job
        it->second.workers.erase(lost.worker_id);
      }
    }
    // Adopted jobs hold no leases, so the scheduler cannot name them: look them up here.
    for (auto& [id, job] : active_) {
      if (job.ended || job.leased || !job.workers.count(lost.worker_id)) continue;
      EndJob(id, {v1::PLACING, v1::RUNNING, v1::RESTARTING, v1::CANCELLING}, v1::FAILED,
             "WorkerLost",
             absl::StrCat("worker ", name, " sent no heartbeat for ",
                          backend_.options.lease_timeout_ms / 1000.0, " s; its ranks are lost"));
      job.workers.erase(lost.worker_id);
    }
  }
}

void JobCoordinator::HandleCancellations(const std::vector<v1::Job>& cancelling, absl::Time now) {
  for (const v1::Job& job : cancelling) {
    auto it = active_.find(job.id());
    if (it == active_.end()) {
      if (orphans_.count(job.id())) continue;  // a worker may still claim its ranks
      EndJob(job.id(), {v1::CANCELLING}, v1::CANCELLED, "Cancelled", "no ranks were running");
      continue;
    }
    ActiveJob& a = it->second;
    if (!a.cancel_sent) {
      SendCancellation(a, job.message());
      a.cancel_sent = true;
      a.ended_at = now;
    }
    int exited = 0;
    for (const auto& [rank, state] : a.ranks) exited += state.phase == v1::RANK_EXITED;
    const bool all_exited = exited >= job.spec().world_size();
    if (all_exited || now - a.ended_at > backend_.options.rank_exit_grace) {
      EndJob(job.id(), {v1::CANCELLING}, v1::CANCELLED, "Cancelled",
             all_exited ? absl::StrCat("all ", exited, " ranks stopped")
                        : absl::StrCat(exited, " of ", job.spec().world_size(),
                                       " ranks confirmed stopping; the slots are released"));
    }
  }
}

void JobCoordinator::ReapEnded(absl::Time now) {
  for (auto it = active_.begin(); it != active_.end();) {
    ActiveJob& a = it->second;
    int exited = 0, running = 0;
    for (const auto& [rank, state] : a.ranks) {
      exited += state.phase == v1::RANK_EXITED;
      running += state.phase == v1::RANK_RUNNING;
    }
    if (!a.ended && now - a.placed_at > backend_.options.placing_timeout &&
        running + exited < a.spec.world_size()) {
      EndJob(a.id, {v1::PLACING}, v1::FAILED, "PlacementTimeout",
             absl::StrCat("only ", running + exited, " of ", a.spec.world_size(),
                          " ranks started within ",
                          absl::FormatDuration(backend_.options.placing_timeout)));
    }
    const bool done = a.ended && (exited >= a.spec.world_size() ||
                                  now - a.ended_at > backend_.options.rank_exit_grace);
    if (done) {
      scheduler_.Remove(a.id);
      it = active_.erase(it);
    } else {
      ++it;
    }
  }
}

bool JobCoordinator::LoadOrphans() {
  if (orphans_loaded_) return true;
  absl::StatusOr<std::vector<v1::Job>> jobs =
      backend_.jobs->ListByState({v1::PLACING, v1::RUNNING, v1::RESTARTING, v1::CANCELLING});
  if (!jobs.ok()) return false;
  for (const v1::Job& job : *jobs) {
    if (!active_.count(job.id())) orphans_[job.id()] = job;
  }
  orphans_loaded_ = true;
  return true;
}

void JobCoordinator::AdoptOrphans(absl::Time now) {
  if (!LoadOrphans()) return;
  const absl::Duration wait = absl::Milliseconds(backend_.options.lease_timeout_ms);
  for (auto it = orphans_.begin(); it != orphans_.end();) {
    if (now - started_at_ <= wait) break;
    const v1::Job& job = it->second;
    if (job.state() == v1::CANCELLING) {
      backend_.jobs
          ->Transition(job.id(), {v1::CANCELLING}, v1::CANCELLED, "Cancelled",
                       "no worker reported ranks of the job after the server restarted")
          .IgnoreError();
    } else {
      backend_.jobs
          ->Transition(
              job.id(), {v1::PLACING, v1::RUNNING, v1::RESTARTING}, v1::FAILED, "Lost",
              absl::StrCat("no worker reported ranks of the job within ", wait / absl::Seconds(1),
                           " s after the server restarted; resubmit it"))
          .IgnoreError();
    }
    it = orphans_.erase(it);
  }
}

// ---- worker streams ------------------------------------------------------------------------

void JobCoordinator::OnRegister(const std::string& worker_id, const v1::RegisterRequest& request) {
  absl::MutexLock lock(&mu_);
  registered_[worker_id] = request;
  if (router_ != nullptr) router_->OnRegister(worker_id, request);
}

std::shared_ptr<WorkerLink> JobCoordinator::OnConnect(const std::string& worker_id,
                                                      const v1::Hello& hello) {
  absl::MutexLock lock(&mu_);
  const bool known_jobs = LoadOrphans();
  auto link = std::make_shared<WorkerLink>(worker_id);
  auto old = links_.find(worker_id);
  if (old != links_.end()) old->second->Close();
  links_[worker_id] = link;
  if (router_ != nullptr) router_->OnConnect(worker_id);
  auto r = registered_.find(worker_id);
  if (r != registered_.end()) {
    const v1::RegisterRequest& reg = r->second;
    scheduler::WorkerState w;
    w.id = worker_id;
    w.name = reg.name();
    w.slots = reg.slots();
    w.device = DeviceOf(reg.device());
    w.labels.insert(reg.labels().begin(), reg.labels().end());
    w.host = reg.advertise_host();
    if (reg.rendezvous_port_min() > 0) {
      w.port_min = reg.rendezvous_port_min();
      w.port_max = reg.rendezvous_port_max();
    }
    w.cached_datasets.insert(reg.cached_datasets().begin(), reg.cached_datasets().end());
    scheduler_.UpsertWorker(w, absl::Now());
    // Ranks from before a reconnect occupy slots the scheduler holds no lease for: nothing is
    // placed on the worker until its first heartbeat says what is free.
    if (!hello.running_jobs().empty()) {
      scheduler_.Heartbeat(worker_id, 0, w.cached_datasets, absl::Now()).IgnoreError();
    }
  }
  for (const std::string& job_id : hello.running_jobs()) {
    auto active = active_.find(job_id);
    if (active != active_.end()) {
      active->second.workers.insert(worker_id);
      continue;
    }
    auto orphan = orphans_.find(job_id);
    if (orphan != orphans_.end()) {
      ActiveJob& a = active_[job_id];
      a.id = job_id;
      a.owner = orphan->second.owner();
      a.spec = orphan->second.spec();
      a.workers.insert(worker_id);
      a.placed_at = absl::Now();
      a.leased = false;
      for (int rank = 0; rank < a.spec.world_size(); ++rank) {
        a.ranks[rank].phase =
            orphan->second.state() == v1::PLACING ? v1::RANK_PHASE_UNSPECIFIED : v1::RANK_RUNNING;
      }
      orphans_.erase(orphan);
      v1::JobEvent event;
      event.mutable_log()->set_rank(-1);
      event.mutable_log()->set_level("INFO");
      event.mutable_log()->set_text(
          absl::StrCat("adopted after a server restart: worker ", worker_id, " runs ranks of it"));
      AppendEventOrLog(job_id, event);
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
  return link;
}

void JobCoordinator::OnDisconnect(const std::shared_ptr<WorkerLink>& link) {
  absl::MutexLock lock(&mu_);
  link->Close();
  auto it = links_.find(link->worker_id());
  if (it != links_.end() && it->second == link) {
    links_.erase(it);
    scheduler_.MarkDisconnected(link->worker_id());
    if (router_ != nullptr) router_->OnDisconnect(link->worker_id());
  }
}

absl::Status JobCoordinator::OnHeartbeat(const std::string& worker_id,
                                         const v1::Heartbeat& heartbeat) {
  absl::MutexLock lock(&mu_);
  if (router_ != nullptr) router_->OnHeartbeat(worker_id, heartbeat);
  std::set<std::string> cached(heartbeat.cached_datasets().begin(),
                               heartbeat.cached_datasets().end());
  return scheduler_.Heartbeat(worker_id, heartbeat.free_slots(), cached, absl::Now());
}

absl::Status JobCoordinator::OnWorkerMessage(const std::string& worker_id,
                                             const v1::WorkerMessage& m) {
  if (m.job_id().empty()) {
    return absl::InvalidArgumentError("job_id: is missing on a job message");
  }
  absl::MutexLock lock(&mu_);
  auto it = active_.find(m.job_id());
  if (it == active_.end() || !it->second.workers.count(worker_id)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", m.job_id(), " has no ranks on worker ", worker_id));
  }
  switch (m.kind_case()) {
    case v1::WorkerMessage::kRankStatus:
      return HandleRankStatus(worker_id, m.job_id(), m.rank_status());
    case v1::WorkerMessage::kProgress:
      return HandleProgress(m.job_id(), m.progress());
    case v1::WorkerMessage::kLog: {
      v1::JobEvent event;
      *event.mutable_log() = m.log();
      return backend_.jobs->AppendEvent(m.job_id(), event).status();
    }
    case v1::WorkerMessage::kResult:
      return HandleResult(m.job_id(), m.result());
    default:
      return absl::InvalidArgumentError(
          "kind: a job message must be rank_status, progress, "
          "log or result");
  }
}

absl::Status JobCoordinator::HandleRankStatus(const std::string& worker_id,
                                              const std::string& job_id,
                                              const v1::RankStatus& status) {
  ActiveJob& a = active_.at(job_id);
  if (status.rank() < 0 || status.rank() >= a.spec.world_size()) {
    return absl::InvalidArgumentError(absl::StrCat("rank_status.rank: ", status.rank(),
                                                   " is outside 0..", a.spec.world_size() - 1));
  }
  RankState& rank = a.ranks[status.rank()];
  rank.phase = status.phase();
  rank.exit_code = status.exit_code();
  rank.message = status.message();
  auto r = registered_.find(worker_id);
  const std::string worker = r == registered_.end() ? worker_id : r->second.name();
  if (status.phase() == v1::RANK_RUNNING && !a.ended) {
    int running = 0;
    for (const auto& [n, s] : a.ranks) running += s.phase == v1::RANK_RUNNING;
    if (running == a.spec.world_size()) {
      backend_.jobs
          ->Transition(job_id, {v1::PLACING}, v1::RUNNING, "Running",
                       absl::StrCat("all ", running, " ranks joined the process group"))
          .IgnoreError();
    }
  }
  if (status.phase() == v1::RANK_EXITED) {
    v1::JobEvent event;
    event.mutable_log()->set_rank(status.rank());
    event.mutable_log()->set_level(status.exit_code() == 0 ? "INFO" : "ERROR");
    event.mutable_log()->set_text(
        absl::StrCat("rank ", status.rank(), " on ", worker, " ", DescribeExit(status.exit_code()),
                     status.message().empty() ? "" : absl::StrCat(": ", status.message())));
    AppendEventOrLog(job_id, event);
    if (!a.ended && !a.cancel_sent && (status.exit_code() != 0 || status.rank() == 0)) {
      const std::string why =
          status.exit_code() != 0
              ? absl::StrCat("rank ", status.rank(), " on worker ", worker, " ",
                             DescribeExit(status.exit_code()),
                             status.message().empty() ? "" : absl::StrCat(": ", status.message()))
              : "rank 0 exited without reporting a result";
      EndJob(job_id, {v1::PLACING, v1::RUNNING, v1::RESTARTING}, v1::FAILED, "RankFailed", why);
    }
  }
  return absl::OkStatus();
}

absl::Status JobCoordinator::HandleProgress(const std::string& job_id,
                                            const v1::Progress& progress) {
  ActiveJob& a = active_.at(job_id);
  RETURN_IF_ERROR(backend_.jobs->UpdateProgress(job_id, progress));
  const absl::Time now = absl::Now();
  // An event only when training moved on (rank 0 repeats its report while a step runs).
  const bool moved =
      progress.step() != a.last_progress_step || progress.epoch() != a.last_progress_epoch;
  if (moved && now - a.last_progress_event >= backend_.options.progress_event_interval) {
    a.last_progress_event = now;
    a.last_progress_step = progress.step();
    a.last_progress_epoch = progress.epoch();
    v1::JobEvent event;
    *event.mutable_progress() = progress;
    return backend_.jobs->AppendEvent(job_id, event).status();
  }
  return absl::OkStatus();
}

absl::Status JobCoordinator::HandleResult(const std::string& job_id, const v1::JobResult& result) {
  ActiveJob& a = active_.at(job_id);
  if (a.ended) return absl::OkStatus();  // a re-sent result after a reconnect
  if (!result.success()) {
    EndJob(job_id, {v1::PLACING, v1::RUNNING, v1::RESTARTING}, v1::FAILED, "TrainingFailed",
           result.message().empty() ? "rank 0 reported a failure" : result.message());
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(v1::Job job, backend_.jobs->Get("", job_id));
  std::string model_ref = job.model_ref();
  if (model_ref.empty()) {
    if (absl::Status st = RegisterModel(a, result, &model_ref); !st.ok()) {
      EndJob(job_id, {v1::PLACING, v1::RUNNING, v1::RESTARTING}, v1::FAILED, "RegistrationFailed",
             absl::StrCat("the model could not be registered: ", st.message()));
      return absl::OkStatus();
    }
  }
  EndJob(job_id, {v1::PLACING, v1::RUNNING, v1::RESTARTING}, v1::SUCCEEDED, "Succeeded",
         absl::StrCat("trained, validated and registered as ", model_ref));
  return absl::OkStatus();
}

absl::Status JobCoordinator::RegisterModel(const ActiveJob& job, const v1::JobResult& result,
                                           std::string* model_ref) {
  RETURN_IF_ERROR(ValidateSha256(result.checkpoint_sha256(), "result.checkpoint_sha256"));
  ASSIGN_OR_RETURN(int64_t size, backend_.blobs->Size(result.checkpoint_sha256()));
  if (size != result.checkpoint_size_bytes()) {
    return absl::FailedPreconditionError(
        absl::StrCat("checkpoint ", result.checkpoint_sha256(), " has ", size,
                     " bytes stored but the result says ", result.checkpoint_size_bytes()));
  }
  v1::ModelVersion m;
  m.set_name(ModelNameOf(job.id, job.spec));
  m.set_owner(job.owner);
  m.set_visibility(job.spec.model_visibility() == v1::VISIBILITY_PUBLIC ? v1::VISIBILITY_PUBLIC
                                                                        : v1::VISIBILITY_PRIVATE);
  m.set_description(job.spec.display_name().empty()
                        ? absl::StrCat(job.spec.model_preset(), " trained by ", job.id)
                        : job.spec.display_name());
  m.mutable_tags()->insert(job.spec.labels().begin(), job.spec.labels().end());
  v1::Lineage* lineage = m.mutable_lineage();
  lineage->set_job_id(job.id);
  lineage->set_dataset(job.spec.dataset());
  lineage->set_dataset_sha256(result.dataset_sha256());
  // The spec's values, then what the rank resolved (preset defaults in place of zeros).
  for (const auto& [k, v] : HyperParameterMap(job.spec)) {
    (*lineage->mutable_hyper_parameters())[k] = v;
  }
  for (const auto& [k, v] : result.hyper_parameters()) {
    (*lineage->mutable_hyper_parameters())[k] = v;
  }
  lineage->set_world_size(job.spec.world_size());
  lineage->set_code_version(result.code_version());
  lineage->set_parent_model(job.spec.initial_model());
  lineage->set_model_preset(job.spec.model_preset());
  m.mutable_metrics()->insert(result.metrics().begin(), result.metrics().end());
  *m.mutable_histograms() = result.histograms();
  m.set_checkpoint_sha256(result.checkpoint_sha256());
  m.set_checkpoint_size_bytes(size);
  m.set_particle(result.particle());
  *m.mutable_energy_range_gev() = result.energy_range_gev();
  *m.mutable_theta_range_rad() = result.theta_range_rad();
  ASSIGN_OR_RETURN(v1::ModelVersion stored, backend_.models->Register(m));
  *model_ref = absl::StrCat(stored.name(), ":", stored.version());
  RETURN_IF_ERROR(backend_.jobs->SetModelRef(job.id, *model_ref));
  v1::JobEvent event;
  event.mutable_model_registered()->set_model_ref(*model_ref);
  event.mutable_model_registered()->mutable_metrics()->insert(result.metrics().begin(),
                                                              result.metrics().end());
  return backend_.jobs->AppendEvent(job.id, event).status();
}

}  // namespace gantry::server
