// FakeGenerationWorker: a WorkerGenerationService hosted in the test process on a real loopback
// port. It checks the bearer secret and streams deterministic fake showers (a function of the
// seed, the shower's index and its energy), or behaves as told: a full queue, or holding the call
// until released or cancelled. It records what it saw so tests can check the router and proxy.
#ifndef GANTRY_TESTS_SERVER_FAKE_GENERATION_WORKER_H_
#define GANTRY_TESTS_SERVER_FAKE_GENERATION_WORKER_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include "gantry/v1/worker.grpc.pb.h"
#include "grpcpp/grpcpp.h"

namespace gantry::testing {

// Thread-safe. Serves from construction to destruction.
class FakeGenerationWorker final : public gantry::v1::WorkerGenerationService::Service {
 public:
  enum class Mode {
    kServe,      // stream the showers
    kQueueFull,  // RESOURCE_EXHAUSTED at once
    kHold,       // send the first chunk, then wait until Release() or the call is cancelled
  };

  explicit FakeGenerationWorker(std::string secret);
  ~FakeGenerationWorker() override;

  const std::string& endpoint() const { return endpoint_; }
  void set_mode(Mode mode) { mode_ = mode; }
  // Cells per shower are cells^3 floats (default 2).
  void set_cells(int cells) { cells_ = cells; }
  void Release() { released_ = true; }

  int calls() const { return calls_; }
  int active() const { return active_; }
  int cancelled_calls() const { return cancelled_; }
  int64_t chunks_written() const { return chunks_written_; }
  std::string last_authorization() const;
  gantry::v1::WorkerGenerateRequest last_request() const;
  // The deadline of the last call (system clock), as the worker saw it.
  std::chrono::system_clock::time_point last_deadline() const;

  grpc::Status Generate(grpc::ServerContext* context,
                        const gantry::v1::WorkerGenerateRequest* request,
                        grpc::ServerWriter<gantry::v1::GenerateChunk>* writer) override;

  // The value of cell `cell` of shower `index` for `seed` and `energy` (what a client can check).
  static float Cell(uint64_t seed, int64_t index, double energy, int cell);

 private:
  const std::string secret_;
  std::unique_ptr<grpc::Server> server_;
  std::string endpoint_;
  std::atomic<Mode> mode_{Mode::kServe};
  std::atomic<int> cells_{2};
  std::atomic<bool> released_{false};
  std::atomic<int> calls_{0}, active_{0}, cancelled_{0};
  std::atomic<int64_t> chunks_written_{0};
  mutable std::mutex mu_;
  std::string last_authorization_;
  gantry::v1::WorkerGenerateRequest last_request_;
  std::chrono::system_clock::time_point last_deadline_;
};

}  // namespace gantry::testing

#endif  // GANTRY_TESTS_SERVER_FAKE_GENERATION_WORKER_H_
