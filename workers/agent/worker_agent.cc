#include "workers/agent/worker_agent.h"

#include <algorithm>
#include <iostream>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/build_info.h"
#include "base/grpc_status.h"
#include "base/log.h"
#include "base/status_macros.h"
#include "base/tls_config.h"
#include "workers/agent/credential_file.h"

namespace gantry::agent {
namespace {

namespace v1 = ::gantry::v1;

constexpr absl::Duration kInitialBackoff = absl::Milliseconds(100);
constexpr absl::Duration kMaxBackoff = absl::Seconds(5);
constexpr absl::Duration kRegisterDeadline = absl::Seconds(10);
// How long Run waits for the last messages to reach the server when shutting down.
constexpr absl::Duration kDrainTimeout = absl::Seconds(5);

// Refusals that retrying cannot fix (before the worker was ever accepted).
bool IsPermanent(const absl::Status& s) {
  return absl::IsUnauthenticated(s) || absl::IsPermissionDenied(s) || absl::IsInvalidArgument(s);
}

uint64_t NewIncarnation() {
  std::random_device device;
  std::mt19937_64 rng((static_cast<uint64_t>(device()) << 32) ^ device() ^
                      static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())));
  uint64_t value = 0;
  while (value == 0) value = rng();
  return value;
}

const char* KindName(v1::WorkerMessage::KindCase kind) {
  return kind == v1::WorkerMessage::kProgress ? "progress" : "log";
}

absl::Duration Jitter(absl::Duration d) {
  thread_local std::mt19937 rng{std::random_device{}()};
  std::uniform_real_distribution<double> factor(0.8, 1.2);
  return d * factor(rng);
}

}  // namespace

WorkerAgent::WorkerAgent(AgentOptions options)
    : options_(std::move(options)), incarnation_(NewIncarnation()) {
  grpc::ChannelArguments args;
  // The channel's own reconnect backoff must not outlast ours (its default grows to 120 s).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  // A path that silently drops everything (a cut link, a dead NAT entry) leaves the TCP
  // connection "up" for as long as the kernel retransmits (minutes): new calls would queue on it
  // and, once the path is back, wait out the retransmission backoff. Pings on the transport
  // declare it dead within keepalive time + timeout, so the channel reconnects on a fresh
  // connection. The server accepts a ping every 5 s without strikes.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetMaxReceiveMessageSize(16 << 20);
  args.SetMaxSendMessageSize(16 << 20);
  channel_ = grpc::CreateCustomChannel(options_.server, ChannelCredentialsFor(options_.tls), args);
  stub_ = v1::WorkerService::NewStub(channel_);

  RankLauncherOptions launch;
  launch.rank_binary = options_.rank_binary;
  launch.extra_args = options_.rank_log_args;
  launch.server = options_.server;
  launch.tls_files = options_.tls_files;
  launch.cache_dir = options_.cache_dir;
  launch.file_roots = absl::StrJoin(options_.file_roots.roots(), ",");
  launch.cache_max_bytes = options_.cache_max_bytes;
  launch.work_root = options_.work_dir;
  launch.kill_grace = absl::Milliseconds(options_.kill_grace_ms);
  launch.max_ranks = options_.slots;
  if (options_.device == v1::DEVICE_KIND_GPU) launch.gpu_ids = options_.device_ids;
  launch.die_with_daemon = options_.ranks_die_with_daemon;
  launch.default_collective_timeout_ms = options_.collective_timeout_ms;
  launcher_ = std::make_unique<RankLauncher>(
      std::move(launch), [this](v1::WorkerMessage m) { Enqueue(std::move(m)); });
}

WorkerAgent::~WorkerAgent() { launcher_.reset(); }

int WorkerAgent::RunningRanks() const {
  return static_cast<int>(launcher_->live_rank_keys().size());
}

void WorkerAgent::Stop() {
  absl::MutexLock lock(&mu_);
  stopping_ = true;
}

void WorkerAgent::Preempt(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (options_.preemption_grace_ms <= 0) {
    stopping_ = true;
    return;
  }
  preempting_ = true;
  preempt_reason_ = reason;
}

std::string WorkerAgent::worker_id() const {
  absl::MutexLock lock(&mu_);
  return worker_id_;
}

int64_t WorkerAgent::sessions() const {
  absl::MutexLock lock(&mu_);
  return sessions_;
}

bool WorkerAgent::connected() const {
  absl::MutexLock lock(&mu_);
  return connected_;
}

void WorkerAgent::Enqueue(v1::WorkerMessage message) {
  absl::MutexLock lock(&mu_);
  const OutboundQueue::PushResult pushed = queue_.Push(std::move(message));
  if (pushed.dropped != v1::WorkerMessage::KIND_NOT_SET &&
      (queue_.dropped() == 1 || queue_.dropped() % 1000 == 0)) {
    GANTRY_LOG(WARNING) << absl::StrCat(
        "the outbound queue is full (", queue_.capacity(),
        " messages not acknowledged by the server): dropped the oldest ", KindName(pushed.dropped),
        " message (", queue_.dropped(),
        " dropped so far; rank status and results are never dropped)");
  }
}

void WorkerAgent::AddAuth(grpc::ClientContext* context, const std::string& secret) {
  context->AddMetadata("authorization", "Bearer " + secret);
}

absl::Status WorkerAgent::Run() {
  GANTRY_LOG(INFO) << absl::StrCat(
      "worker \"", options_.name, "\" ", GantryVersionString(), ": server ", options_.server, ", ",
      options_.slots, " slot(s)",
      options_.device == v1::DEVICE_KIND_GPU
          ? absl::StrCat(" on GPUs ", absl::StrJoin(options_.device_ids, ","))
          : std::string(" on the CPU"),
      ", ", options_.threads_per_rank, " thread(s) per rank, work dir ", options_.work_dir);
  std::thread sessions([this] { SessionLoop(); });
  bool preempted = false;
  std::string reason;
  {
    absl::MutexLock lock(&mu_);
    auto stop_or_preempt = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || preempting_;
    };
    mu_.Await(absl::Condition(&stop_or_preempt));
    preempted = !stopping_;
    reason = preempt_reason_;
  }
  if (preempted) DrainForPreemption(reason);
  launcher_->StopAll();  // every rank's RANK_EXITED is queued when this returns
  absl::Status fatal;
  {
    absl::MutexLock lock(&mu_);
    closing_ = true;
    if (!mu_.AwaitWithTimeout(absl::Condition(&loop_done_), kDrainTimeout)) {
      GANTRY_LOG(WARNING) << absl::StrCat("the server did not close the stream in time; ",
                                          queue_.size(), " message(s) not acknowledged");
      if (current_context_ != nullptr) current_context_->TryCancel();
    }
    fatal = fatal_;
  }
  sessions.join();
  {
    absl::MutexLock lock(&mu_);
    if (!queue_.empty()) {
      GANTRY_LOG(WARNING) << absl::StrCat(queue_.size(),
                                          " message(s) were never acknowledged by the server");
    }
  }
  GANTRY_LOG(INFO) << "stopped";
  return fatal;
}

void WorkerAgent::DrainForPreemption(const std::string& reason) {
  const absl::Duration grace = absl::Milliseconds(options_.preemption_grace_ms);
  v1::WorkerMessage notice;
  notice.mutable_preempting()->set_grace_ms(options_.preemption_grace_ms);
  notice.mutable_preempting()->set_reason(reason);
  Enqueue(std::move(notice));
  const int ranks = launcher_->CheckpointAndStopAll();
  GANTRY_LOG(WARNING) << absl::StrCat("preemption notice (", reason, "): ", ranks,
                                      " rank(s) checkpointing; waiting up "
                                      "to ",
                                      absl::FormatDuration(grace));
  const absl::Time deadline = absl::Now() + grace;
  // In slices, so that Stop() (SIGINT) cuts the wait short.
  while (!launcher_->WaitIdle(std::min(absl::Milliseconds(100), deadline - absl::Now()))) {
    absl::MutexLock lock(&mu_);
    if (stopping_ || absl::Now() >= deadline) break;
  }
  const int left = launcher_->live_ranks();
  if (left > 0) {
    GANTRY_LOG(WARNING) << absl::StrCat(
        left, " rank(s) still running after the preemption grace; stopping them");
  }
}

void WorkerAgent::SessionLoop() {
  absl::Duration backoff = kInitialBackoff;
  while (true) {
    bool established = false;
    const absl::Status status = RunSession(&established);
    absl::MutexLock lock(&mu_);
    if (closing_) break;
    if (!registered_once_ && IsPermanent(status)) {
      fatal_ = status;
      stopping_ = true;
      break;
    }
    if (established) backoff = kInitialBackoff;
    const absl::Duration delay = Jitter(backoff);
    GANTRY_LOG(WARNING) << absl::StrCat("connection to ", options_.server, " lost or refused (",
                                        status.ToString(), "); retrying in ",
                                        absl::FormatDuration(delay));
    if (mu_.AwaitWithTimeout(absl::Condition(&closing_), delay)) break;
    backoff = std::min(backoff * 2, kMaxBackoff);
  }
  absl::MutexLock lock(&mu_);
  loop_done_ = true;
}

v1::RegisterRequest WorkerAgent::BuildRegister() const {
  v1::RegisterRequest r;
  r.set_name(options_.name);
  r.set_slots(options_.slots);
  r.set_device(options_.device);
  for (int id : options_.device_ids) r.add_device_ids(id);
  r.set_threads_per_rank(options_.threads_per_rank);
  for (const auto& [k, v] : options_.labels) (*r.mutable_labels())[k] = v;
  r.set_advertise_host(options_.advertise_host);
  r.set_version(GantryVersionString());
  r.set_rendezvous_port_min(options_.rendezvous_port_min);
  r.set_rendezvous_port_max(options_.rendezvous_port_max);
  for (const RegisterSource& source : register_sources_) source(r);
  return r;
}

void WorkerAgent::AddHeartbeatSource(HeartbeatSource source) {
  heartbeat_sources_.push_back(std::move(source));
}

void WorkerAgent::AddRegisterSource(RegisterSource source) {
  register_sources_.push_back(std::move(source));
}

absl::StatusOr<v1::RegisterResponse> WorkerAgent::Register() {
  v1::RegisterResponse registered;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kRegisterDeadline));
  AddAuth(&context, options_.join_token);
  {
    absl::MutexLock lock(&mu_);
    if (closing_) return absl::CancelledError("shutting down");
    current_context_ = &context;
  }
  v1::RegisterRequest request = BuildRegister();
  // The credential of the last registration: the server keeps it for a worker that shows it,
  // and refuses the name to anyone else while this worker is live.
  const std::string previous = options_.credential->Get();
  request.set_previous_credential(previous);
  const grpc::Status s = stub_->Register(&context, request, &registered);
  absl::MutexLock lock(&mu_);
  current_context_ = nullptr;
  if (!s.ok()) return FromGrpcStatus(s);
  if (registered.worker_credential().empty()) {
    return absl::UnavailableError("the server returned no worker credential");
  }
  options_.credential->Set(registered.worker_credential());
  // Kept for the next run of this daemon: without it a restart cannot take its name back.
  if (!options_.credential_file.empty() && registered.worker_credential() != previous) {
    if (absl::Status kept =
            WriteCredentialFile(options_.credential_file, registered.worker_credential());
        !kept.ok()) {
      GANTRY_LOG(WARNING) << absl::StrCat(kept.message(),
                                          "; a restart of this daemon cannot register as ",
                                          options_.name, " again");
    }
  }
  if (worker_id_ != registered.worker_id()) {
    if (!worker_id_.empty())
      GANTRY_LOG(INFO) << "the server gave a new worker id " + registered.worker_id();
    worker_id_ = registered.worker_id();
  }
  registered_once_ = true;
  return registered;
}

v1::WorkerMessage WorkerAgent::BuildHello(const std::vector<std::string>& running) {
  v1::WorkerMessage hello;
  hello.mutable_hello()->set_worker_id(worker_id());
  hello.mutable_hello()->set_incarnation(incarnation_);
  std::set<std::string> jobs(running.begin(), running.end());
  {
    // Jobs with messages still to deliver count too: a result whose rank has exited must still
    // reach a restarted server, which only accepts messages about jobs a hello claimed.
    absl::MutexLock lock(&mu_);
    std::set<std::string> owed = queue_.jobs();
    jobs.insert(owed.begin(), owed.end());
  }
  for (const std::string& job : jobs) hello.mutable_hello()->add_running_jobs(job);
  return hello;
}

absl::Status WorkerAgent::RunSession(bool* established) {
  ASSIGN_OR_RETURN(const v1::RegisterResponse registered, Register());
  const absl::Duration interval = absl::Milliseconds(
      registered.heartbeat_interval_ms() > 0 ? registered.heartbeat_interval_ms() : 2000);
  // A stream that hears nothing (not even heartbeat acks) for a lease is treated as dead.
  const absl::Duration silence_limit =
      std::max(absl::Milliseconds(registered.lease_timeout_ms()), 3 * interval);

  grpc::ClientContext context;
  AddAuth(&context, options_.credential->Get());
  {
    absl::MutexLock lock(&mu_);
    if (closing_) return absl::CancelledError("shutting down");
    current_context_ = &context;
    session_over_ = false;
    last_server_message_ = absl::Now();
  }
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::ServerMessage>> stream =
      stub_->Connect(&context);
  const std::string id = worker_id();
  const std::vector<std::string> running = launcher_->running_jobs();
  const v1::WorkerMessage hello = BuildHello(running);
  if (!stream->Write(hello)) {
    const grpc::Status s = stream->Finish();
    absl::MutexLock lock(&mu_);
    current_context_ = nullptr;
    return s.ok() ? absl::UnavailableError("the Connect stream closed before the hello")
                  : FromGrpcStatus(s);
  }
  int64_t session = 0;
  size_t resend = 0;
  {
    absl::MutexLock lock(&mu_);
    connected_ = true;
    session = ++sessions_;
    // Whatever the server has not acknowledged goes again, oldest first (it drops duplicates).
    queue_.RewindUnacked();
    resend = queue_.size();
  }
  *established = true;
  GANTRY_LOG(INFO) << absl::StrCat(
      "connected as ", id, " (stream ", session, ", running jobs: [", absl::StrJoin(running, ","),
      "]", resend > 0 ? absl::StrCat(", re-sending ", resend, " unacknowledged message(s)") : "",
      ")");
  std::thread writer([&] { WriterLoop(stream.get(), &context, interval, silence_limit); });
  v1::ServerMessage message;
  while (stream->Read(&message)) {
    {
      absl::MutexLock lock(&mu_);
      last_server_message_ = absl::Now();
    }
    Handle(message);
  }
  {
    absl::MutexLock lock(&mu_);
    session_over_ = true;
    connected_ = false;
  }
  writer.join();
  const grpc::Status s = stream->Finish();
  absl::MutexLock lock(&mu_);
  current_context_ = nullptr;
  if (closing_) return absl::OkStatus();
  return s.ok() ? absl::UnavailableError("the server ended the Connect stream") : FromGrpcStatus(s);
}

void WorkerAgent::WriterLoop(grpc::ClientReaderWriter<v1::WorkerMessage, v1::ServerMessage>* stream,
                             grpc::ClientContext* context, absl::Duration heartbeat_interval,
                             absl::Duration silence_limit) {
  absl::Time next_heartbeat = absl::Now();
  while (true) {
    enum { kNone, kHeartbeat, kQueued, kClose } action = kNone;
    v1::WorkerMessage message;
    {
      absl::MutexLock lock(&mu_);
      // Closing waits until the server acknowledged everything (Run bounds that wait).
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return session_over_ || queue_.NextUnsent() != nullptr || (closing_ && queue_.empty());
      };
      mu_.AwaitWithDeadline(absl::Condition(&ready), next_heartbeat);
      if (session_over_) return;
      const absl::Time now = absl::Now();
      if (now - last_server_message_ > silence_limit) {
        GANTRY_LOG(WARNING) << absl::StrCat("no word from the server for ",
                                            absl::FormatDuration(silence_limit),
                                            "; dropping the stream");
        context->TryCancel();
        return;
      }
      if (now >= next_heartbeat) {
        action = kHeartbeat;
      } else if (const v1::WorkerMessage* next = queue_.NextUnsent(); next != nullptr) {
        message = *next;  // a copy: Push may reshuffle the deque while we write
        action = kQueued;
      } else if (closing_ && queue_.empty()) {
        action = kClose;
      }
    }
    if (action == kHeartbeat) {
      v1::Heartbeat* hb = message.mutable_heartbeat();
      hb->set_free_slots(std::max(0, options_.slots - launcher_->live_ranks()));
      for (const auto& [job_id, attempt, rank] : launcher_->live_rank_keys()) {
        v1::RunningRank* r = hb->add_running_ranks();
        r->set_job_id(job_id);
        r->set_attempt(attempt);
        r->set_rank(rank);
      }
      for (const HeartbeatSource& source : heartbeat_sources_) source(*hb);
      next_heartbeat = absl::Now() + heartbeat_interval;
      if (!stream->Write(message)) {
        context->TryCancel();
        return;
      }
    } else if (action == kQueued) {
      if (!stream->Write(message)) {
        // Still held: re-sent after the reconnect (at-least-once).
        context->TryCancel();
        return;
      }
      absl::MutexLock lock(&mu_);
      queue_.MarkSent(message.seq());
    } else if (action == kClose) {
      stream->WritesDone();
      return;
    }
  }
}

void WorkerAgent::Handle(const v1::ServerMessage& message) {
  switch (message.kind_case()) {
    case v1::ServerMessage::kAssignment: {
      const v1::Assignment& a = message.assignment();
      const absl::Status s = launcher_->Launch(a);
      if (absl::IsAlreadyExists(s)) {
        GANTRY_LOG(INFO) << "ignoring a duplicate assignment: " + std::string(s.message());
      } else if (!s.ok()) {
        GANTRY_LOG(ERROR) << absl::StrCat("cannot start rank ", a.rank(), " of ", a.job_id(), ": ",
                                          s.ToString());
        v1::WorkerMessage failed;
        failed.set_job_id(a.job_id());
        v1::RankStatus* rs = failed.mutable_rank_status();
        rs->set_rank(a.rank());
        rs->set_phase(v1::RANK_PHASE_EXITED);
        rs->set_exit_code(127);
        rs->set_message(absl::StrCat("the worker could not start the rank: ", s.message()));
        Enqueue(std::move(failed));
      }
      break;
    }
    case v1::ServerMessage::kCancellation: {
      const v1::Cancellation& c = message.cancellation();
      const int n = launcher_->Cancel(c.job_id());
      if (n == 0) GANTRY_LOG(INFO) << "cancellation of " + c.job_id() + ": no rank of it runs here";
      break;
    }
    case v1::ServerMessage::kCheckpointAndStop: {
      const v1::CheckpointAndStop& c = message.checkpoint_and_stop();
      const int n = launcher_->CheckpointAndStop(c.job_id(), c.attempt());
      GANTRY_LOG(INFO) << absl::StrCat("checkpoint-and-stop of ", c.job_id(), " attempt ",
                                       c.attempt(), " (", c.reason(), "): ", n,
                                       " rank(s) signalled");
      break;
    }
    case v1::ServerMessage::kAck: {
      // What the server stored is no longer ours to keep.
      absl::MutexLock lock(&mu_);
      queue_.Ack(message.ack().acked_seq());
      break;
    }
    default:
      break;
  }
}

}  // namespace gantry::agent
