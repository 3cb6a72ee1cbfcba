// FakeGenerationWorker: a WorkerGenerationService hosted in the test process on a real loopback
// port. It checks the bearer secret and streams deterministic fake showers (a function of the
// seed, the shower's index and its energy), or behaves as told: a full queue, or holding the call
// until released or cancelled. It records what it saw so tests can check the router and proxy.
// Export streams a deterministic payload (ExportPayload) as a worker does, or breaks the protocol
// as told (ExportMode), for the server's checks of a hostile worker.
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

  enum class ExportMode {
    kServe,             // metadata (size, sha256), then the payload in 1 MiB chunks
    kWrongSha256,       // the payload with the sha256 of other bytes
    kMoreThanDeclared,  // declares the payload's size, sends one byte more
    kLessThanDeclared,  // declares one byte more than it sends
    kTooLarge,          // declares 1 GiB (and sends nothing more)
    kDataFirst,         // a data chunk before the metadata
    kHugeChunk,         // the whole payload in one 4 MiB message
    kSlow,              // as kServe, 300 ms before each data chunk
  };

  explicit FakeGenerationWorker(std::string secret);
  ~FakeGenerationWorker() override;

  const std::string& endpoint() const { return endpoint_; }
  void set_mode(Mode mode) { mode_ = mode; }
  // Cells per shower are cells^3 floats (default 2).
  void set_cells(int cells) { cells_ = cells; }
  void Release() { released_ = true; }
  void set_export_mode(ExportMode mode) { export_mode_ = mode; }

  // The bytes Export serves: `size` bytes, a function of the index.
  static std::string ExportPayload(int64_t size = (int64_t{5} << 20) / 2);

  int calls() const { return calls_; }
  int active() const { return active_; }
  int cancelled_calls() const { return cancelled_; }
  int64_t chunks_written() const { return chunks_written_; }
  std::string last_authorization() const;
  gantry::v1::WorkerGenerateRequest last_request() const;
  gantry::v1::WorkerExportRequest last_export_request() const;
  int export_calls() const { return export_calls_; }
  // The deadline of the last call (system clock), as the worker saw it.
  std::chrono::system_clock::time_point last_deadline() const;

  grpc::Status Generate(grpc::ServerContext* context,
                        const gantry::v1::WorkerGenerateRequest* request,
                        grpc::ServerWriter<gantry::v1::GenerateChunk>* writer) override;

  grpc::Status Export(grpc::ServerContext* context, const gantry::v1::WorkerExportRequest* request,
                      grpc::ServerWriter<gantry::v1::ExportModelChunk>* writer) override;

  // The value of cell `cell` of shower `index` for `seed` and `energy` (what a client can check).
  static float Cell(uint64_t seed, int64_t index, double energy, int cell);

 private:
  const std::string secret_;
  std::unique_ptr<grpc::Server> server_;
  std::string endpoint_;
  std::atomic<Mode> mode_{Mode::kServe};
  std::atomic<int> cells_{2};
  std::atomic<bool> released_{false};
  std::atomic<ExportMode> export_mode_{ExportMode::kServe};
  std::atomic<int> export_calls_{0};
  std::atomic<int> calls_{0}, active_{0}, cancelled_{0};
  std::atomic<int64_t> chunks_written_{0};
  mutable std::mutex mu_;
  std::string last_authorization_;
  gantry::v1::WorkerGenerateRequest last_request_;
  gantry::v1::WorkerExportRequest last_export_request_;
  std::chrono::system_clock::time_point last_deadline_;
};

}  // namespace gantry::testing

#endif  // GANTRY_TESTS_SERVER_FAKE_GENERATION_WORKER_H_
