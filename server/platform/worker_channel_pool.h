// WorkerChannelPool: one cached gRPC channel (and WorkerGenerationService stub) per worker
// generation endpoint, so a Generate call never pays for a new connection.
#ifndef GANTRY_SERVER_PLATFORM_WORKER_CHANNEL_POOL_H_
#define GANTRY_SERVER_PLATFORM_WORKER_CHANNEL_POOL_H_

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "gantry/v1/worker.grpc.pb.h"
#include "grpcpp/channel.h"
#include "grpcpp/security/credentials.h"

namespace gantry::server {

// How the server dials workers' generation endpoints: TLS verifying their certificates
// (`credentials`; null = plaintext) and, with TLS, the name every worker's certificate carries
// instead of its endpoint's host (`tls_name`, --worker-tls-name; empty = the host).
struct WorkerChannelSettings {
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  std::string tls_name;
};

// Thread-safe. Channels live as long as the pool (a worker that comes back on the same endpoint
// reuses its channel, which reconnects by itself with a short backoff).
class WorkerChannelPool {
 public:
  // Channels dial as `settings` say and accept messages of at most `max_receive_bytes` from
  // workers (-1 = no limit).
  explicit WorkerChannelPool(const WorkerChannelSettings& settings = {},
                             int max_receive_bytes = -1);

  // The stub for `endpoint` ("host:port"), created on first use. Stubs are thread-safe.
  gantry::v1::WorkerGenerationService::Stub& StubFor(const std::string& endpoint);

 private:
  struct Entry {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<gantry::v1::WorkerGenerationService::Stub> stub;
  };
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  const int max_receive_bytes_;
  const std::string tls_name_;
  absl::Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_PLATFORM_WORKER_CHANNEL_POOL_H_
