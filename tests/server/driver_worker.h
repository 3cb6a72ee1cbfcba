// DriverWorker: a test driver speaking the WorkerService protocol directly (register, control
// stream, heartbeats, rank status, results), and UploadCheckpoint, a helper that streams a
// checkpoint up as a rank would. Shared by the server's job and generation tests.
#ifndef GANTRY_TESTS_SERVER_DRIVER_WORKER_H_
#define GANTRY_TESTS_SERVER_DRIVER_WORKER_H_

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "base/sha256.h"
#include "gantry/v1/worker.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gantry::testing {

namespace v1 = ::gantry::v1;

// What a DriverWorker announces about generation (RegisterRequest fields 12 and 13).
struct DriverServing {
  std::string endpoint;  // empty = it does not generate
  std::string secret;
};

// A test driver of the worker protocol: one registered worker with its Connect stream; heartbeats
// every 200 ms while `beating` (free slots, and the loaded models set by set_loaded_models).
class DriverWorker {
 public:
  DriverWorker(std::shared_ptr<grpc::Channel> channel, std::string join, std::string name,
               int slots, std::vector<std::string> running = {}, DriverServing serving = {},
               uint64_t incarnation = 0, std::string previous_credential = "",
               const std::map<std::string, std::string>& labels = {},
               const std::vector<int>& gpu_ids = {})
      : stub_(v1::WorkerService::NewStub(channel)),
        join_(std::move(join)),
        name_(name),
        slots_(slots) {
    v1::RegisterRequest reg;
    reg.set_name(name);
    reg.set_slots(slots);
    // With GPU ids: a GPU worker offering them.
    reg.set_device(gpu_ids.empty() ? v1::DEVICE_KIND_CPU : v1::DEVICE_KIND_GPU);
    for (int id : gpu_ids) reg.add_device_ids(id);
    reg.set_threads_per_rank(1);
    reg.set_advertise_host("127.0.0.1");
    reg.set_rendezvous_port_min(30100);
    reg.set_rendezvous_port_max(30110);
    reg.set_generation_endpoint(serving.endpoint);
    reg.set_generation_secret(serving.secret);
    reg.set_previous_credential(previous_credential);
    reg.mutable_labels()->insert(labels.begin(), labels.end());
    v1::RegisterResponse registered;
    // As a daemon does: a name still held by a predecessor whose stream the server has not seen
    // end yet (FAILED_PRECONDITION) is retried for a while.
    for (int waited = 0;; waited += 100) {
      grpc::ClientContext rctx;
      rctx.AddMetadata("authorization", "Bearer " + join_);
      status_ = stub_->Register(&rctx, reg, &registered);
      if (status_.error_code() != grpc::StatusCode::FAILED_PRECONDITION || waited >= 5000) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!status_.ok()) return;
    id_ = registered.worker_id();
    credential_ = registered.worker_credential();
    ctx_.AddMetadata("authorization", "Bearer " + credential_);
    stream_ = stub_->Connect(&ctx_);
    v1::WorkerMessage hello;
    hello.mutable_hello()->set_worker_id(id_);
    hello.mutable_hello()->set_incarnation(incarnation);
    for (const std::string& j : running) hello.mutable_hello()->add_running_jobs(j);
    Write(hello);
    reader_ = std::thread([this] {
      v1::ServerMessage m;
      while (stream_->Read(&m)) {
        if (m.has_ack()) {
          acks_++;
          acked_seq_ = m.ack().acked_seq();
          continue;
        }
        std::lock_guard<std::mutex> lock(mu_);
        inbox_.push_back(m);
      }
      reader_done_ = true;
    });
    beater_ = std::thread([this] {
      while (!stop_) {
        if (beating_) Heartbeat();
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    });
  }
  ~DriverWorker() { Close(); }

  void Close() {
    if (stop_.exchange(true)) return;
    if (beater_.joinable()) beater_.join();
    if (stream_ != nullptr) {
      {
        std::lock_guard<std::mutex> lock(write_mu_);
        stream_->WritesDone();
      }
      if (!reader_done_) ctx_.TryCancel();  // a stream the server ended keeps its status
      if (reader_.joinable()) reader_.join();
      finish_status_ = stream_->Finish();
    }
  }

  // Sends one heartbeat now.
  void Heartbeat() {
    v1::WorkerMessage hb;
    hb.mutable_heartbeat()->set_free_slots(free_slots_);
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const std::string& sha : loaded_models_) {
        hb.mutable_heartbeat()->add_loaded_models()->set_checkpoint_sha256(sha);
      }
    }
    Write(hb);
  }
  // The checkpoints the heartbeats say are loaded (generation).
  void set_loaded_models(std::vector<std::string> shas) {
    std::lock_guard<std::mutex> lock(mu_);
    loaded_models_ = std::move(shas);
  }

  void Write(const v1::WorkerMessage& m) {
    std::lock_guard<std::mutex> lock(write_mu_);
    stream_->Write(m);
  }
  void Send(const std::string& job, v1::WorkerMessage m) {
    m.set_job_id(job);
    Write(m);
  }
  void RankStatus(const std::string& job, int rank, v1::RankPhase phase, int code = 0,
                  int attempt = 0) {
    v1::WorkerMessage m;
    m.set_attempt(attempt);
    m.mutable_rank_status()->set_rank(rank);
    m.mutable_rank_status()->set_phase(phase);
    m.mutable_rank_status()->set_exit_code(code);
    if (code != 0) m.mutable_rank_status()->set_message("boom");
    Send(job, m);
  }

  // The next assignment or cancellation, waiting up to 10 s.
  std::optional<v1::ServerMessage> Next(int timeout_ms = 10000) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < until) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (!inbox_.empty()) {
          v1::ServerMessage m = inbox_.front();
          inbox_.pop_front();
          return m;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return std::nullopt;
  }

  // HeartbeatAck.acked_seq of the last ack, and how many acks came.
  uint64_t acked_seq() const { return acked_seq_; }
  int64_t acks() const { return acks_; }
  // Waits up to timeout_ms for an ack that acknowledges `seq`.
  bool WaitAcked(uint64_t seq, int timeout_ms = 10000) {
    for (int waited = 0; waited < timeout_ms; waited += 10) {
      if (acked_seq_ >= seq) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return acked_seq_ >= seq;
  }

  const std::string& id() const { return id_; }
  // The worker credential Register returned (the bearer of its stream and checkpoint calls).
  const std::string& credential() const { return credential_; }
  // Whether the server ended the stream (or it broke).
  bool stream_ended() const { return reader_done_; }
  // How the stream ended, once it has (Close() or the server ended it).
  grpc::Status Finish() {
    Close();
    return finish_status_;
  }
  const std::string& name() const { return name_; }
  const grpc::Status& status() const { return status_; }
  void set_beating(bool on) { beating_ = on; }
  void set_free_slots(int n) { free_slots_ = n; }

 private:
  std::unique_ptr<v1::WorkerService::Stub> stub_;
  std::string join_;
  std::string name_;
  int slots_;
  grpc::Status status_;
  std::string id_;
  std::string credential_;
  grpc::Status finish_status_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::WorkerMessage, v1::ServerMessage>> stream_;
  std::mutex write_mu_;
  std::mutex mu_;
  std::deque<v1::ServerMessage> inbox_;
  std::vector<std::string> loaded_models_;
  std::thread reader_, beater_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> reader_done_{false};
  std::atomic<bool> beating_{true};
  std::atomic<int> free_slots_{1};
  std::atomic<uint64_t> acked_seq_{0};
  std::atomic<int64_t> acks_{0};
};

// Uploads `bytes` as a checkpoint of `job` through WorkerService.UploadCheckpoint (bearer `join`:
// a worker credential of a worker the job ran on, or a rank credential); returns its sha256
// (empty, with a test failure, when the upload fails).
// As UploadCheckpoint, at `step` by a rank of `attempt`; returns the call's status.
inline grpc::Status UploadCheckpointAt(const std::shared_ptr<grpc::Channel>& channel,
                                       const std::string& join, const std::string& job,
                                       const std::string& bytes, int64_t step, int attempt,
                                       std::optional<double> fom = std::nullopt) {
  auto stub = v1::WorkerService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + join);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::UploadCheckpointResponse response;
  auto writer = stub->UploadCheckpoint(&ctx, &response);
  v1::UploadCheckpointRequest header;
  header.mutable_header()->set_job_id(job);
  header.mutable_header()->set_epoch(static_cast<int>(step / 10));
  header.mutable_header()->set_step(step);
  header.mutable_header()->set_attempt(attempt);
  header.mutable_header()->set_sha256(Sha256Hex(bytes));
  header.mutable_header()->set_size_bytes(bytes.size());
  if (fom.has_value()) header.mutable_header()->set_fom(*fom);
  writer->Write(header);
  v1::UploadCheckpointRequest chunk;
  chunk.set_chunk(bytes);
  writer->Write(chunk);
  writer->WritesDone();
  return writer->Finish();
}

inline std::string UploadCheckpoint(const std::shared_ptr<grpc::Channel>& channel,
                                    const std::string& join, const std::string& job,
                                    const std::string& bytes) {
  auto stub = v1::WorkerService::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + join);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::UploadCheckpointResponse response;
  auto writer = stub->UploadCheckpoint(&ctx, &response);
  v1::UploadCheckpointRequest header;
  header.mutable_header()->set_job_id(job);
  header.mutable_header()->set_epoch(1);
  header.mutable_header()->set_step(4);
  header.mutable_header()->set_sha256(Sha256Hex(bytes));
  header.mutable_header()->set_size_bytes(bytes.size());
  writer->Write(header);
  for (size_t at = 0; at < bytes.size(); at += 1 << 20) {
    v1::UploadCheckpointRequest chunk;
    chunk.set_chunk(bytes.substr(at, 1 << 20));
    writer->Write(chunk);
  }
  writer->WritesDone();
  grpc::Status s = writer->Finish();
  EXPECT_TRUE(s.ok()) << s.error_code() << ": " << s.error_message();
  return response.sha256();
}

}  // namespace gantry::testing

#endif  // GANTRY_TESTS_SERVER_DRIVER_WORKER_H_
