// WorkerAgent against a scripted WorkerService on a real loopback gRPC server (so the test can
// drop a stream and refuse registrations on cue): assignments start real rank processes
// (fake_rank) whose frames reach the stream in order with the job id, cancellations stop them,
// messages produced while disconnected are delivered after the reconnect with a hello naming the
// running jobs, messages not acknowledged are re-sent with their seqs after every reconnect (and
// acknowledged ones never), duplicate assignments are ignored, Stop reports the ranks' exits; and
// the daemon process itself on SIGTERM and kill -9.
#include "tests/support/build_paths.h"
#include "workers/agent/worker_agent.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "base/sha256.h"
#include "gantry/v1/worker.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "tests/agent/cache_entry.h"
#include "tests/agent/daemon_process.h"
#include "tests/support/temp_dir.h"
#include "workers/runner/dataset_cache.h"

namespace gantry::agent {
namespace {

namespace v1 = ::gantry::v1;

constexpr char kToken[] = "scripted-join-token";
// The worker credential the scripted Register hands out; Connect takes only it.
constexpr char kCredential[] = "gwc_scripted-worker-credential";

// A WorkerService whose behaviour the test scripts: it records everything the worker sends (with
// the stream it came on), pushes ServerMessages on request and can drop the current stream.
class ScriptedWorkerService final : public v1::WorkerService::Service {
 public:
  grpc::Status Register(grpc::ServerContext* context, const v1::RegisterRequest* request,
                        v1::RegisterResponse* response) override {
    absl::MutexLock lock(&mu_);
    if (!Authorized(context, kToken)) return grpc::Status(grpc::UNAUTHENTICATED, "bad join token");
    if (absl::Now() < refuse_until_) return grpc::Status(grpc::UNAVAILABLE, "restarting");
    registers_.push_back(*request);
    response->set_worker_id("worker-" + request->name());
    response->set_worker_credential(kCredential);
    response->set_heartbeat_interval_ms(200);
    response->set_lease_timeout_ms(5000);
    return grpc::Status::OK;
  }

  grpc::Status Connect(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<v1::ServerMessage, v1::WorkerMessage>* stream) override {
    int session = 0;
    {
      absl::MutexLock lock(&mu_);
      if (!Authorized(context, kCredential)) {
        return grpc::Status(grpc::UNAUTHENTICATED, "Connect takes the worker credential");
      }
      session = ++sessions_;
      drop_ = false;
    }
    bool reader_done = false;
    std::thread reader([&] {
      v1::WorkerMessage m;
      while (stream->Read(&m)) {
        absl::MutexLock lock(&mu_);
        received_.push_back({session, m});
        stored_seq_ = std::max(stored_seq_, m.seq());
        if (drop_after_ && drop_after_(m)) {
          drop_after_ = nullptr;
          drop_ = true;
        }
      }
      absl::MutexLock lock(&mu_);
      reader_done = true;
    });
    absl::Time next_ack = absl::Now();
    while (true) {
      std::vector<v1::ServerMessage> out;
      bool drop = false;
      {
        absl::MutexLock lock(&mu_);
        auto wake = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return reader_done || drop_ || !outbox_.empty();
        };
        mu_.AwaitWithDeadline(absl::Condition(&wake), next_ack);
        if (reader_done) break;
        drop = drop_;
        out.assign(outbox_.begin(), outbox_.end());
        outbox_.clear();
      }
      if (drop) {
        context->TryCancel();
        break;
      }
      if (absl::Now() >= next_ack) {
        // Everything received counts as stored.
        v1::ServerMessage ack;
        ack.mutable_ack()->set_server_time_ms(absl::ToUnixMillis(absl::Now()));
        {
          absl::MutexLock lock(&mu_);
          if (acking_) ack.mutable_ack()->set_acked_seq(stored_seq_);
        }
        out.push_back(ack);
        next_ack = absl::Now() + absl::Milliseconds(500);
      }
      for (const v1::ServerMessage& m : out) stream->Write(m);
    }
    reader.join();
    return grpc::Status::OK;
  }

  void Send(v1::ServerMessage m) {
    absl::MutexLock lock(&mu_);
    outbox_.push_back(std::move(m));
  }
  // Whether acks carry acked_seq (off: nothing the worker sent counts as stored).
  void set_acking(bool on) {
    absl::MutexLock lock(&mu_);
    acking_ = on;
  }
  // Drops the current stream once a received message matches, and refuses Register for `refuse`.
  void DropWhen(std::function<bool(const v1::WorkerMessage&)> match, absl::Duration refuse) {
    absl::MutexLock lock(&mu_);
    drop_after_ = [this, match, refuse](const v1::WorkerMessage& m)
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
                        if (!match(m)) return false;
                        refuse_until_ = absl::Now() + refuse;
                        return true;
                      };
  }
  // Waits until `pred` holds over the received messages.
  bool WaitFor(std::function<bool(const std::vector<std::pair<int, v1::WorkerMessage>>&)> pred,
               absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto check = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return pred(received_); };
    return mu_.AwaitWithTimeout(absl::Condition(&check), timeout);
  }
  std::vector<std::pair<int, v1::WorkerMessage>> received() {
    absl::MutexLock lock(&mu_);
    return received_;
  }
  std::vector<v1::RegisterRequest> registers() {
    absl::MutexLock lock(&mu_);
    return registers_;
  }

 private:
  static bool Authorized(grpc::ServerContext* context, const char* secret) {
    auto it = context->client_metadata().find("authorization");
    return it != context->client_metadata().end() &&
           std::string(it->second.data(), it->second.size()) == std::string("Bearer ") + secret;
  }

  absl::Mutex mu_;
  std::vector<std::pair<int, v1::WorkerMessage>> received_ ABSL_GUARDED_BY(mu_);
  std::vector<v1::RegisterRequest> registers_ ABSL_GUARDED_BY(mu_);
  std::deque<v1::ServerMessage> outbox_ ABSL_GUARDED_BY(mu_);
  std::function<bool(const v1::WorkerMessage&)> drop_after_ ABSL_GUARDED_BY(mu_);
  bool drop_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time refuse_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int sessions_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t stored_seq_ ABSL_GUARDED_BY(mu_) = 0;  // acknowledged every 500 ms
  bool acking_ ABSL_GUARDED_BY(mu_) = true;
};

// Starts `service` on a free loopback port, stored in `port`; null when the server did not start.
std::unique_ptr<grpc::Server> ServeOnLoopback(grpc::Service* service, int* port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), port);
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

using Received = std::vector<std::pair<int, v1::WorkerMessage>>;

bool HasPhase(const Received& r, const std::string& job, int rank, v1::RankPhase phase) {
  for (const auto& [s, m] : r) {
    if (m.job_id() == job && m.has_rank_status() && m.rank_status().rank() == rank &&
        m.rank_status().phase() == phase) {
      return true;
    }
  }
  return false;
}

// The messages about `job`, re-sent ones (seq seen before) left out as the server does.
std::vector<v1::WorkerMessage> OfJob(const Received& r, const std::string& job) {
  std::vector<v1::WorkerMessage> out;
  uint64_t seen = 0;
  for (const auto& [s, m] : r) {
    if (m.seq() == 0 || m.seq() > seen) {
      if (m.job_id() == job) out.push_back(m);
    }
    seen = std::max(seen, m.seq());
  }
  return out;
}

class WorkerAgentTest : public ::testing::Test {
 public:
  static v1::ServerMessage Assign(const std::string& job, int rank,
                                  std::map<std::string, std::string> labels) {
    v1::ServerMessage m;
    v1::Assignment* a = m.mutable_assignment();
    a->set_job_id(job);
    a->set_rank(rank);
    a->set_world_size(2);
    for (const auto& [k, v] : labels) (*a->mutable_spec()->mutable_labels())[k] = v;
    return m;
  }

 protected:
  void SetUp() override {
    int port = 0;
    server_ = ServeOnLoopback(&service_, &port);
    ASSERT_NE(server_, nullptr);
    AgentOptions o;
    o.server = "127.0.0.1:" + std::to_string(port);
    o.join_token = kToken;
    o.name = "scripted";
    o.slots = 2;
    o.cache_dir = dir_.File("cache");
    o.work_dir = dir_.File("work");
    o.rank_binary = FAKE_RANK_BINARY;
    EditOptions(&o);
    agent_ = std::make_unique<WorkerAgent>(o);
    run_ = std::thread([this] { run_status_ = agent_->Run(); });
  }
  // Changes the options of the agent SetUp starts.
  virtual void EditOptions(AgentOptions* /*options*/) {}
  void TearDown() override {
    agent_->Stop();
    run_.join();
    EXPECT_TRUE(run_status_.ok()) << run_status_;
    agent_.reset();
    server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  }

  gantry::testing::TempDir dir_;
  ScriptedWorkerService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<WorkerAgent> agent_;
  std::thread run_;
  absl::Status run_status_;
};

TEST_F(WorkerAgentTest, RegistersSaysHelloAndRunsAssignedRanks) {
  ASSERT_TRUE(service_.WaitFor(
      [](const Received& r) {
        int heartbeats = 0;
        for (const auto& [s, m] : r) heartbeats += m.has_heartbeat() ? 1 : 0;
        return heartbeats >= 2;
      },
      absl::Seconds(10)));
  const std::vector<v1::RegisterRequest> registers = service_.registers();
  ASSERT_EQ(registers.size(), 1u);
  EXPECT_EQ(registers[0].name(), "scripted");
  EXPECT_EQ(registers[0].slots(), 2);
  EXPECT_EQ(registers[0].rendezvous_port_min(), 29400);
  EXPECT_EQ(registers[0].rendezvous_port_max(), 29499);
  Received r = service_.received();
  ASSERT_TRUE(r[0].second.has_hello());
  EXPECT_EQ(r[0].second.hello().worker_id(), "worker-scripted");
  EXPECT_EQ(r[0].second.hello().running_jobs_size(), 0);
  EXPECT_EQ(agent_->worker_id(), "worker-scripted");

  service_.Send(Assign("job-1", 0, {{"fake.frames", "5"}, {"fake.exit", "0"}}));
  service_.Send(Assign("job-1", 1, {{"fake.mode", "sleep"}}));
  service_.Send(Assign("job-1", 1, {{"fake.mode", "sleep"}}));  // duplicate: ignored
  ASSERT_TRUE(service_.WaitFor(
      [](const Received& r) { return HasPhase(r, "job-1", 0, v1::RANK_PHASE_EXITED); },
      absl::Seconds(10)));
  ASSERT_TRUE(service_.WaitFor(
      [](const Received& r) { return HasPhase(r, "job-1", 1, v1::RANK_PHASE_RUNNING); },
      absl::Seconds(10)));
  // One busy slot shows in the heartbeats.
  ASSERT_TRUE(service_.WaitFor(
      [](const Received& r) {
        return !r.empty() && r.back().second.has_heartbeat() &&
               r.back().second.heartbeat().free_slots() == 1;
      },
      absl::Seconds(5)));

  std::vector<v1::WorkerMessage> rank0;
  int starting1 = 0;
  for (const v1::WorkerMessage& m : OfJob(service_.received(), "job-1")) {
    if (m.has_rank_status() && m.rank_status().rank() == 1) {
      starting1 += m.rank_status().phase() == v1::RANK_PHASE_STARTING ? 1 : 0;
    } else if (!(m.has_progress() && m.progress().epochs() == 1) &&
               !(m.has_result() && m.result().message() == "fake result of rank 1")) {
      rank0.push_back(m);
    }
  }
  EXPECT_EQ(starting1, 1);
  ASSERT_EQ(rank0.size(), 9u);  // STARTING, RUNNING, 5 progress, result, EXITED
  EXPECT_EQ(rank0[0].rank_status().phase(), v1::RANK_PHASE_STARTING);
  EXPECT_EQ(rank0[1].rank_status().phase(), v1::RANK_PHASE_RUNNING);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(rank0[2 + i].progress().step(), i + 1);
  EXPECT_TRUE(rank0[7].has_result());
  EXPECT_EQ(rank0[8].rank_status().phase(), v1::RANK_PHASE_EXITED);
  EXPECT_EQ(rank0[8].rank_status().exit_code(), 0);

  // Cancellation stops the sleeping rank and frees its slot.
  v1::ServerMessage cancel;
  cancel.mutable_cancellation()->set_job_id("job-1");
  service_.Send(cancel);
  ASSERT_TRUE(service_.WaitFor(
      [](const Received& r) { return HasPhase(r, "job-1", 1, v1::RANK_PHASE_EXITED); },
      absl::Seconds(5)));
  for (const v1::WorkerMessage& m : OfJob(service_.received(), "job-1")) {
    if (m.has_rank_status() && m.rank_status().rank() == 1 &&
        m.rank_status().phase() == v1::RANK_PHASE_EXITED) {
      EXPECT_EQ(m.rank_status().exit_code(), -SIGTERM);
    }
  }
  ASSERT_TRUE(service_.WaitFor(
      [](const Received& r) {
        return !r.empty() && r.back().second.has_heartbeat() &&
               r.back().second.heartbeat().free_slots() == 2;
      },
      absl::Seconds(5)));
}

TEST_F(WorkerAgentTest, MessagesProducedWhileDisconnectedArriveAfterTheReconnect) {
  ASSERT_TRUE(service_.WaitFor([](const Received& r) { return !r.empty(); }, absl::Seconds(10)));
  // The stream drops as soon as the rank says RUNNING and Register is refused for a second; the
  // rank's 10 progress frames (one per 300 ms) and its exit come partly while disconnected, partly
  // after the reconnect (which the backoff of 0.1+0.2+0.4+0.8 s puts at about 1.5 s).
  service_.DropWhen(
      [](const v1::WorkerMessage& m) {
        return m.has_rank_status() && m.rank_status().phase() == v1::RANK_PHASE_RUNNING;
      },
      absl::Seconds(1));
  service_.Send(Assign("job-q", 0, {{"fake.frames", "10"}, {"fake.frame_delay_ms", "300"}}));
  ASSERT_TRUE(service_.WaitFor(
      [](const Received& r) { return HasPhase(r, "job-q", 0, v1::RANK_PHASE_EXITED); },
      absl::Seconds(20)));

  const Received r = service_.received();
  // The second stream opened with a hello naming the still-running job.
  bool hello2 = false;
  for (const auto& [s, m] : r) {
    if (s == 2 && m.has_hello()) {
      hello2 = true;
      EXPECT_EQ(m.hello().worker_id(), "worker-scripted");
      ASSERT_EQ(m.hello().running_jobs_size(), 1);
      EXPECT_EQ(m.hello().running_jobs(0), "job-q");
    }
  }
  EXPECT_TRUE(hello2);
  ASSERT_GE(service_.registers().size(), 2u);
  // The first registration had no credential; the re-registration shows the one it got.
  EXPECT_EQ(service_.registers()[0].previous_credential(), "");
  EXPECT_EQ(service_.registers()[1].previous_credential(), kCredential);
  // Nothing lost, nothing reordered across the two streams.
  std::vector<v1::WorkerMessage> job = OfJob(r, "job-q");
  ASSERT_EQ(job.size(), 14u);
  EXPECT_EQ(job[0].rank_status().phase(), v1::RANK_PHASE_STARTING);
  EXPECT_EQ(job[1].rank_status().phase(), v1::RANK_PHASE_RUNNING);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(job[2 + i].progress().step(), i + 1);
  EXPECT_TRUE(job[12].has_result());
  EXPECT_EQ(job[13].rank_status().phase(), v1::RANK_PHASE_EXITED);
  // The progress came on the second stream.
  int on_second = 0;
  for (const auto& [s, m] : r) on_second += s == 2 && m.has_progress() ? 1 : 0;
  EXPECT_GE(on_second, 3);
  EXPECT_EQ(agent_->sessions(), 2);
}

// The seqs of the messages about `job` that came on stream `session`.
std::vector<uint64_t> SeqsOn(const Received& r, int session, const std::string& job) {
  std::vector<uint64_t> seqs;
  for (const auto& [s, m] : r) {
    if (s == session && m.job_id() == job) seqs.push_back(m.seq());
  }
  return seqs;
}

const v1::Hello* HelloOf(const Received& r, int session) {
  for (const auto& [s, m] : r) {
    if (s == session && m.has_hello()) return &m.hello();
  }
  return nullptr;
}

TEST_F(WorkerAgentTest, KeepsWhatIsNotAcknowledgedAndResendsItWithTheSameSeqs) {
  ASSERT_TRUE(service_.WaitFor([](const Received& r) { return !r.empty(); }, absl::Seconds(10)));
  service_.set_acking(false);
  service_.Send(Assign("job-k", 0, {{"fake.frames", "3"}}));
  ASSERT_TRUE(service_.WaitFor(
      [](const Received& r) { return HasPhase(r, "job-k", 0, v1::RANK_PHASE_EXITED); },
      absl::Seconds(10)));
  // Starting, running, 3 progress, the result, the exit: numbered in order, from 1.
  const std::vector<uint64_t> first = SeqsOn(service_.received(), 1, "job-k");
  ASSERT_EQ(first.size(), 7u);
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(first[i], i + 1);

  // A new stream before any ack: everything again, same seqs, same order; the hello names the job
  // (its rank has exited, its messages are still owed) and the same incarnation.
  service_.DropWhen([](const v1::WorkerMessage& m) { return m.has_heartbeat(); },
                    absl::ZeroDuration());
  ASSERT_TRUE(service_.WaitFor([](const Received& r) { return SeqsOn(r, 2, "job-k").size() >= 7; },
                               absl::Seconds(10)));
  Received r = service_.received();
  EXPECT_EQ(SeqsOn(r, 2, "job-k"), first);
  ASSERT_NE(HelloOf(r, 1), nullptr);
  ASSERT_NE(HelloOf(r, 2), nullptr);
  EXPECT_NE(HelloOf(r, 1)->incarnation(), 0u);
  EXPECT_EQ(HelloOf(r, 2)->incarnation(), HelloOf(r, 1)->incarnation());
  ASSERT_EQ(HelloOf(r, 2)->running_jobs_size(), 1);
  EXPECT_EQ(HelloOf(r, 2)->running_jobs(0), "job-k");

  // Once acknowledged, nothing of it is sent again.
  service_.set_acking(true);
  absl::SleepFor(absl::Seconds(1.2));  // acks go out every 500 ms
  service_.DropWhen([](const v1::WorkerMessage& m) { return m.has_heartbeat(); },
                    absl::ZeroDuration());
  ASSERT_TRUE(service_.WaitFor(
      [](const Received& r) {
        int heartbeats = 0;
        for (const auto& [s, m] : r) heartbeats += s == 3 && m.has_heartbeat() ? 1 : 0;
        return heartbeats >= 2;
      },
      absl::Seconds(10)));
  r = service_.received();
  EXPECT_TRUE(SeqsOn(r, 3, "job-k").empty());
  ASSERT_NE(HelloOf(r, 3), nullptr);
  EXPECT_EQ(HelloOf(r, 3)->running_jobs_size(), 0);
  EXPECT_EQ(agent_->sessions(), 3);
}

TEST_F(WorkerAgentTest, StopReportsTheExitOfRunningRanks) {
  ASSERT_TRUE(service_.WaitFor([](const Received& r) { return !r.empty(); }, absl::Seconds(10)));
  service_.Send(Assign("job-s", 0, {{"fake.mode", "sleep"}}));
  ASSERT_TRUE(service_.WaitFor(
      [](const Received& r) { return HasPhase(r, "job-s", 0, v1::RANK_PHASE_RUNNING); },
      absl::Seconds(10)));
  agent_->Stop();
  run_.join();
  EXPECT_TRUE(run_status_.ok());
  run_ = std::thread([] {});
  const Received r = service_.received();
  EXPECT_TRUE(HasPhase(r, "job-s", 0, v1::RANK_PHASE_EXITED));
}

TEST_F(WorkerAgentTest, CheckpointAndStopSignalsTheRanksOfThatAttempt) {
  ASSERT_TRUE(service_.WaitFor([](const Received& r) { return !r.empty(); }, absl::Seconds(10)));
  v1::ServerMessage assign = Assign("job-d", 0, {{"fake.mode", "sleep"}});
  assign.mutable_assignment()->set_attempt(4);
  service_.Send(assign);
  ASSERT_TRUE(service_.WaitFor(
      [](const Received& r) { return HasPhase(r, "job-d", 0, v1::RANK_PHASE_RUNNING); },
      absl::Seconds(10)));
  v1::ServerMessage stale;  // another attempt: nothing to signal
  stale.mutable_checkpoint_and_stop()->set_job_id("job-d");
  stale.mutable_checkpoint_and_stop()->set_attempt(3);
  service_.Send(stale);
  v1::ServerMessage drain;
  drain.mutable_checkpoint_and_stop()->set_job_id("job-d");
  drain.mutable_checkpoint_and_stop()->set_attempt(4);
  drain.mutable_checkpoint_and_stop()->set_reason("Drained");
  service_.Send(drain);
  ASSERT_TRUE(service_.WaitFor(
      [](const Received& r) { return HasPhase(r, "job-d", 0, v1::RANK_PHASE_EXITED); },
      absl::Seconds(10)));
  for (const v1::WorkerMessage& m : OfJob(service_.received(), "job-d")) {
    EXPECT_EQ(m.attempt(), 4) << m.ShortDebugString();
    if (m.has_rank_status() && m.rank_status().phase() == v1::RANK_PHASE_EXITED) {
      EXPECT_EQ(m.rank_status().exit_code(), 200);
    }
  }
}

TEST(WorkerDaemonProcessTest, SigtermIsAPreemptionNoticeRanksCheckpointWithinTheGrace) {
  gantry::testing::TempDir dir;
  ScriptedWorkerService service;
  int port = 0;
  std::unique_ptr<grpc::Server> server = ServeOnLoopback(&service, &port);
  ASSERT_NE(server, nullptr);
  gantry::testing::DaemonProcess daemon(
      {"--server=127.0.0.1:" + std::to_string(port), std::string("--join-token=") + kToken,
       "--name=preempted", "--slots=2", "--cache-dir=" + dir.File("cache"),
       "--preemption-grace-ms=3000", "--kill-grace-ms=1000", std::string("--rank-binary=") + FAKE_RANK_BINARY},
      dir.File("daemon.log"));
  ASSERT_TRUE(service.WaitFor([](const Received& r) { return !r.empty(); }, absl::Seconds(10)))
      << daemon.Log();
  v1::ServerMessage polite = WorkerAgentTest::Assign("job-p", 0, {{"fake.mode", "sleep"}});
  polite.mutable_assignment()->set_attempt(2);
  service.Send(polite);
  service.Send(WorkerAgentTest::Assign("job-q", 0, {{"fake.mode", "ignore-usr1"}}));
  ASSERT_TRUE(service.WaitFor(
      [](const Received& r) {
        return HasPhase(r, "job-p", 0, v1::RANK_PHASE_RUNNING) &&
               HasPhase(r, "job-q", 0, v1::RANK_PHASE_RUNNING);
      },
      absl::Seconds(10)))
      << daemon.Log();

  const absl::Time signalled = absl::Now();
  EXPECT_EQ(daemon.Signal(SIGTERM, 20000), 0) << daemon.Log();
  const absl::Duration took = absl::Now() - signalled;
  const Received r = service.received();
  // The notice went first, then the checkpointing rank's exit 200; the rank that ignored SIGUSR1
  // was stopped with SIGTERM once the grace was over.
  int notice_at = -1, polite_exit_at = -1;
  for (size_t i = 0; i < r.size(); ++i) {
    const v1::WorkerMessage& m = r[i].second;
    if (m.has_preempting() && notice_at < 0) {
      notice_at = static_cast<int>(i);
      EXPECT_EQ(m.preempting().grace_ms(), 3000);
      EXPECT_EQ(m.preempting().reason(), "SIGTERM");
    }
    if (m.job_id() == "job-p") {
      EXPECT_EQ(m.attempt(), 2) << m.ShortDebugString();
      if (m.has_rank_status() && m.rank_status().phase() == v1::RANK_PHASE_EXITED) {
        polite_exit_at = static_cast<int>(i);
        EXPECT_EQ(m.rank_status().exit_code(), 200);
      }
    }
    if (m.job_id() == "job-q" && m.has_rank_status() &&
        m.rank_status().phase() == v1::RANK_PHASE_EXITED) {
      EXPECT_EQ(m.rank_status().exit_code(), -SIGTERM);
      EXPECT_EQ(m.attempt(), 0);
    }
  }
  ASSERT_GE(notice_at, 0) << daemon.Log();
  ASSERT_GE(polite_exit_at, 0) << daemon.Log();
  EXPECT_LT(notice_at, polite_exit_at);
  EXPECT_TRUE(HasPhase(r, "job-q", 0, v1::RANK_PHASE_EXITED)) << daemon.Log();
  EXPECT_GE(took, absl::Milliseconds(2900)) << "the deaf rank was stopped before the grace ended";
  EXPECT_LT(took, absl::Seconds(15));
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
}

TEST(WorkerDaemonProcessTest, RanksDieWithAKilledDaemonAndSigtermStopsThemCleanly) {
  gantry::testing::TempDir dir;
  ScriptedWorkerService service;
  int port = 0;
  std::unique_ptr<grpc::Server> server = ServeOnLoopback(&service, &port);
  ASSERT_NE(server, nullptr);
  const std::vector<std::string> args = {"--server=127.0.0.1:" + std::to_string(port),
                                         std::string("--join-token=") + kToken,
                                         "--name=proc",
                                         "--slots=2",
                                         "--cache-dir=" + dir.File("cache"),
                                         "--ranks-die-with-daemon=true",
                                         std::string("--rank-binary=") + FAKE_RANK_BINARY};
  auto rank_pid = [&](const std::string& job) {
    return std::atoi([&] {
      std::ifstream in(dir.File("cache") + "/work/" + job + "/rank-0/pid.txt");
      std::stringstream s;
      s << in.rdbuf();
      return s.str();
    }()
                         .c_str());
  };
  auto alive = [](pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return !stat.empty() && stat.find(") Z ") == std::string::npos;
  };

  // SIGTERM: the daemon stops its rank, reports the exit and exits 0.
  {
    gantry::testing::DaemonProcess daemon(args, dir.File("daemon1.log"));
    ASSERT_TRUE(service.WaitFor([](const Received& r) { return !r.empty(); }, absl::Seconds(10)))
        << daemon.Log();
    service.Send(WorkerAgentTest::Assign("job-t", 0, {{"fake.mode", "sleep"}}));
    ASSERT_TRUE(service.WaitFor(
        [](const Received& r) { return HasPhase(r, "job-t", 0, v1::RANK_PHASE_RUNNING); },
        absl::Seconds(10)))
        << daemon.Log();
    EXPECT_EQ(daemon.Signal(SIGTERM, 10000), 0) << daemon.Log();
    EXPECT_TRUE(HasPhase(service.received(), "job-t", 0, v1::RANK_PHASE_EXITED));
    EXPECT_FALSE(alive(rank_pid("job-t")));
  }
  // kill -9: nobody is left to stop the rank, so the kernel does.
  {
    gantry::testing::DaemonProcess daemon(args, dir.File("daemon2.log"));
    service.Send(WorkerAgentTest::Assign("job-k", 0, {{"fake.mode", "sleep"}}));
    ASSERT_TRUE(service.WaitFor(
        [](const Received& r) { return HasPhase(r, "job-k", 0, v1::RANK_PHASE_RUNNING); },
        absl::Seconds(10)))
        << daemon.Log();
    const pid_t rank = rank_pid("job-k");
    ASSERT_GT(rank, 0);
    ASSERT_TRUE(alive(rank));
    EXPECT_EQ(daemon.Signal(SIGKILL, 10000), 128 + SIGKILL);
    bool gone = false;
    for (int i = 0; i < 100 && !gone; ++i) {
      gone = !alive(rank);
      if (!gone) absl::SleepFor(absl::Milliseconds(20));
    }
    EXPECT_TRUE(gone) << "rank " << rank << " outlived its daemon";
  }
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
}

std::vector<std::string> Sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

TEST(WorkerDaemonProcessTest, ReportsItsDatasetCacheAndEvictsItAtStart) {
  gantry::testing::TempDir dir;
  const std::string cache_dir = dir.File("cache");
  const std::string a(1000, 'a'), b(1000, 'b'), c(1000, 'c'), e(1000, 'e');
  ASSERT_TRUE(gantry::testing::FillCacheEntry(cache_dir, a).ok());  // the least recently used
  ASSERT_TRUE(gantry::testing::FillCacheEntry(cache_dir, b).ok());
  ASSERT_TRUE(gantry::testing::FillCacheEntry(cache_dir, c).ok());
  // An interrupted download: never reported.
  std::ofstream(cache_dir + "/datasets/" + Sha256Hex("d") + ".h5.part") << std::string(700, 'd');

  ScriptedWorkerService service;
  int port = 0;
  std::unique_ptr<grpc::Server> server = ServeOnLoopback(&service, &port);
  ASSERT_NE(server, nullptr);
  gantry::testing::DaemonProcess daemon(
      {"--server=127.0.0.1:" + std::to_string(port), std::string("--join-token=") + kToken,
       "--name=cached", "--cache-dir=" + cache_dir, "--cache-max-bytes=2500",
       std::string("--rank-binary=") + FAKE_RANK_BINARY},
      dir.File("daemon.log"));
  auto heartbeat_with = [](const std::vector<std::string>& keys, int64_t bytes) {
    return [keys, bytes](const Received& r) {
      for (const auto& [s, m] : r) {
        if (!m.has_heartbeat()) continue;
        const v1::Heartbeat& hb = m.heartbeat();
        if (std::vector<std::string>(hb.cached_datasets().begin(), hb.cached_datasets().end()) ==
                keys &&
            hb.cache_bytes() == bytes) {
          return true;
        }
      }
      return false;
    };
  };
  // At start the daemon evicted the least recently used entry to get under 2500 bytes.
  const std::vector<std::string> kept = Sorted({Sha256Hex(b), Sha256Hex(c)});
  ASSERT_TRUE(service.WaitFor(heartbeat_with(kept, 2000), absl::Seconds(10))) << daemon.Log();
  ASSERT_FALSE(service.registers().empty());
  const v1::RegisterRequest reg = service.registers().front();
  EXPECT_EQ(std::vector<std::string>(reg.cached_datasets().begin(), reg.cached_datasets().end()),
            kept);
  EXPECT_NE(daemon.Log().find("evicted " + Sha256Hex(a)), std::string::npos) << daemon.Log();
  EXPECT_FALSE(std::ifstream(cache_dir + "/datasets/" + Sha256Hex(a) + ".h5").good());

  // A rank fills another entry while the daemon runs: later heartbeats report it.
  ASSERT_TRUE(gantry::testing::FillCacheEntry(cache_dir, e).ok());
  const std::vector<std::string> now = Sorted({Sha256Hex(b), Sha256Hex(c), Sha256Hex(e)});
  EXPECT_TRUE(service.WaitFor(heartbeat_with(now, 3000), absl::Seconds(15))) << daemon.Log();
  EXPECT_EQ(daemon.Signal(SIGTERM, 10000), 0) << daemon.Log();
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
}

// A GPU worker (options as BuildAgentOptions makes them in a CUDA build): it registers its GPU ids
// and starts each rank on a GPU no other live rank holds.
class GpuWorkerAgentTest : public WorkerAgentTest {
 protected:
  void EditOptions(AgentOptions* o) override {
    o->device = v1::DEVICE_KIND_GPU;
    o->device_ids = {4, 7};
    o->slots = 2;
  }
  std::string ArgsOf(const std::string& job, int rank) {
    std::ifstream in(dir_.File("work") + "/" + job + "/rank-" + std::to_string(rank) + "/args.txt");
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
};

TEST_F(GpuWorkerAgentTest, RegistersItsGpusAndGivesEachRankItsOwn) {
  ASSERT_TRUE(service_.WaitFor([](const Received& r) { return !r.empty(); }, absl::Seconds(10)));
  const std::vector<v1::RegisterRequest> registers = service_.registers();
  ASSERT_EQ(registers.size(), 1u);
  EXPECT_EQ(registers[0].device(), v1::DEVICE_KIND_GPU);
  EXPECT_EQ(std::vector<int>(registers[0].device_ids().begin(), registers[0].device_ids().end()),
            (std::vector<int>{4, 7}));
  EXPECT_EQ(registers[0].slots(), 2);

  service_.Send(Assign("job-g", 0, {{"fake.mode", "sleep"}}));
  service_.Send(Assign("job-g", 1, {{"fake.mode", "sleep"}}));
  for (int rank : {0, 1}) {
    ASSERT_TRUE(service_.WaitFor(
        [rank](const Received& r) { return HasPhase(r, "job-g", rank, v1::RANK_PHASE_RUNNING); },
        absl::Seconds(10)));
  }
  const std::string args0 = ArgsOf("job-g", 0);
  const std::string args1 = ArgsOf("job-g", 1);
  EXPECT_NE(args0.find("\n--device=cuda:4\n"), std::string::npos) << args0;
  EXPECT_NE(args1.find("\n--device=cuda:7\n"), std::string::npos) << args1;
  ASSERT_TRUE(service_.WaitFor(
      [](const Received& r) {
        return !r.empty() && r.back().second.has_heartbeat() &&
               r.back().second.heartbeat().free_slots() == 0;
      },
      absl::Seconds(5)));

  // Both GPUs are free again after the job's ranks exit: the next job's rank gets the first one.
  v1::ServerMessage cancel;
  cancel.mutable_cancellation()->set_job_id("job-g");
  service_.Send(cancel);
  for (int rank : {0, 1}) {
    ASSERT_TRUE(service_.WaitFor(
        [rank](const Received& r) { return HasPhase(r, "job-g", rank, v1::RANK_PHASE_EXITED); },
        absl::Seconds(15)));
  }
  service_.Send(Assign("job-h", 0, {{"fake.mode", "sleep"}}));
  ASSERT_TRUE(service_.WaitFor(
      [](const Received& r) { return HasPhase(r, "job-h", 0, v1::RANK_PHASE_RUNNING); },
      absl::Seconds(10)));
  const std::string args = ArgsOf("job-h", 0);
  EXPECT_NE(args.find("\n--device=cuda:4\n"), std::string::npos) << args;
}

}  // namespace
}  // namespace gantry::agent
