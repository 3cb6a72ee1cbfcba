// WorkerAgent: the worker daemon's control loop. Registers with gantry-server, keeps one Connect
// stream (hello, heartbeats, queued rank messages up; assignments, cancellations,
// checkpoint-and-stop requests and acks down), starts, cancels and drains ranks through a
// RankLauncher, handles a preemption notice (Preempt), and reconnects with exponential backoff when
// the connection or the server goes away; ranks keep running meanwhile and their messages wait in a
// bounded OutboundQueue until the server acknowledges that it stored them (re-sent in order after a
// reconnect).
#ifndef GANTRY_WORKERS_AGENT_WORKER_AGENT_H_
#define GANTRY_WORKERS_AGENT_WORKER_AGENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gantry/v1/worker.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "workers/agent/agent_options.h"
#include "workers/agent/outbound_queue.h"
#include "workers/agent/rank_launcher.h"

namespace gantry::agent {

class WorkerAgent {
 public:
  // `options` must be resolved (ResolveAgentOptions): token read, name and dirs filled in.
  explicit WorkerAgent(AgentOptions options);
  ~WorkerAgent();
  WorkerAgent(const WorkerAgent&) = delete;
  WorkerAgent& operator=(const WorkerAgent&) = delete;

  // Parts of the daemon besides ranks (dataset cache, generation serving) add what they report.
  // Call before Run(); sources are called from the agent's threads and must be thread-safe.
  using HeartbeatSource = std::function<void(gantry::v1::Heartbeat&)>;
  using RegisterSource = std::function<void(gantry::v1::RegisterRequest&)>;
  void AddHeartbeatSource(HeartbeatSource source);
  void AddRegisterSource(RegisterSource source);

  // Serves until Stop(): then stops every rank (SIGTERM, SIGKILL after the grace), sends their
  // exits if connected, closes the stream and returns OK. Returns the server's error when the very
  // first Register is refused for good (bad join token, invalid request); later failures are
  // retried forever. Call once.
  absl::Status Run();
  // Asks Run to finish; thread-safe, returns at once.
  void Stop();
  // A preemption notice (the daemon's SIGTERM): Run queues Preempting{grace_ms} for the server,
  // asks every rank to checkpoint and stop (SIGUSR1), waits up to preemption_grace_ms for them to
  // exit (Stop() cuts the wait short), then finishes as after Stop(). With preemption_grace_ms 0
  // it is Stop(). Thread-safe, returns at once.
  void Preempt(const std::string& reason);

  // Rank processes running now (the daemon's idle exit).
  int RunningRanks() const;
  // The id the server gave this worker ("" before the first Register).
  std::string worker_id() const;
  // Connect streams opened so far (1 + reconnects).
  int64_t sessions() const;
  bool connected() const;
  // Random per process, never 0 (Hello.incarnation).
  uint64_t incarnation() const { return incarnation_; }

 private:
  // Register, reconnect and back off until closing_.
  void SessionLoop();
  // One Register + Connect stream, until it breaks or closing_ and drained. *established is set
  // once the hello went out.
  absl::Status RunSession(bool* established);
  // The Register call of a session: keeps the credential (and its file) and the worker id.
  absl::StatusOr<gantry::v1::RegisterResponse> Register();
  // The hello of a Connect stream: this worker's id and incarnation, and every job it runs or
  // still owes messages about.
  gantry::v1::WorkerMessage BuildHello(const std::vector<std::string>& running);
  // Sends heartbeats and queued messages on `stream` until the session ends.
  void WriterLoop(
      grpc::ClientReaderWriter<gantry::v1::WorkerMessage, gantry::v1::ServerMessage>* stream,
      grpc::ClientContext* context, absl::Duration heartbeat_interval,
      absl::Duration silence_limit);
  void Handle(const gantry::v1::ServerMessage& message);
  // The preemption grace: Preempting to the server, SIGUSR1 to every rank, wait for them.
  void DrainForPreemption(const std::string& reason);
  void Enqueue(gantry::v1::WorkerMessage message);
  gantry::v1::RegisterRequest BuildRegister() const;
  static void AddAuth(grpc::ClientContext* context, const std::string& secret);

  const AgentOptions options_;
  const uint64_t incarnation_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<gantry::v1::WorkerService::Stub> stub_;

  mutable absl::Mutex mu_;
  OutboundQueue queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;    // Stop() was called
  bool preempting_ ABSL_GUARDED_BY(mu_) = false;  // Preempt() was called
  std::string preempt_reason_ ABSL_GUARDED_BY(mu_);
  bool closing_ ABSL_GUARDED_BY(mu_) = false;       // ranks stopped: drain, close, no reconnect
  bool loop_done_ ABSL_GUARDED_BY(mu_) = false;     // SessionLoop returned
  bool session_over_ ABSL_GUARDED_BY(mu_) = false;  // the current stream's reader finished
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
  bool registered_once_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status fatal_ ABSL_GUARDED_BY(mu_);
  absl::Time last_server_message_ ABSL_GUARDED_BY(mu_);
  grpc::ClientContext* current_context_ ABSL_GUARDED_BY(mu_) = nullptr;  // call in progress
  std::string worker_id_ ABSL_GUARDED_BY(mu_);
  int64_t sessions_ ABSL_GUARDED_BY(mu_) = 0;

  std::vector<HeartbeatSource> heartbeat_sources_;  // fixed once Run() starts
  std::vector<RegisterSource> register_sources_;

  // Declared last: its supervisor threads call Enqueue, so it goes first on destruction.
  std::unique_ptr<RankLauncher> launcher_;
};

}  // namespace gantry::agent

#endif  // GANTRY_WORKERS_AGENT_WORKER_AGENT_H_
