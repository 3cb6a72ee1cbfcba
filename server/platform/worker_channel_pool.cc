#include "server/platform/worker_channel_pool.h"

#include <utility>

#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace gantry::server {

WorkerChannelPool::WorkerChannelPool(const WorkerChannelSettings& settings, int max_receive_bytes)
    : credentials_(settings.credentials != nullptr ? settings.credentials
                                                   : grpc::InsecureChannelCredentials()),
      max_receive_bytes_(max_receive_bytes),
      tls_name_(settings.credentials != nullptr ? settings.tls_name : "") {}

gantry::v1::WorkerGenerationService::Stub& WorkerChannelPool::StubFor(const std::string& endpoint) {
  absl::MutexLock lock(&mu_);
  Entry& e = entries_[endpoint];
  if (e.stub == nullptr) {
    grpc::ChannelArguments args;
    // Generation chunks are sized by the client (up to 1024 showers of 51x51x25 floats): no size
    // limit on what the worker sends back unless the pool's owner sets one.
    args.SetMaxReceiveMessageSize(max_receive_bytes_);
    // A worker that restarts on the same endpoint is reachable again within about a second
    // (gRPC's default backoff grows to two minutes).
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
    // One certificate name for every worker (--worker-tls-name) instead of the endpoint's host.
    if (!tls_name_.empty()) args.SetSslTargetNameOverride(tls_name_);
    e.channel = grpc::CreateCustomChannel(endpoint, credentials_, args);
    e.stub = gantry::v1::WorkerGenerationService::NewStub(e.channel);
  }
  return *e.stub;
}

}  // namespace gantry::server
