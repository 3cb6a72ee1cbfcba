#include "workers/serving/serving_extension.h"

#include <fstream>
#include <iostream>
#include <random>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/log.h"
#include "base/metrics/metrics_registry.h"
#include "base/tls_config.h"
#include "workers/agent/worker_agent.h"

namespace gantry::serving {

std::string RandomSecret() {
  unsigned char bytes[32] = {0};
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  urandom.read(reinterpret_cast<char*>(bytes), sizeof(bytes));
  if (!urandom) {  // no /dev/urandom: fall back to the C++ random device
    std::random_device device;
    for (unsigned char& b : bytes) b = static_cast<unsigned char>(device());
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 15]);
  }
  return out;
}

ServingExtension::ServingExtension(const agent::AgentOptions& options, ModelLoader loader,
                                   ModelExporter exporter)
    : host_(options.advertise_host),
      tls_(options.tls),
      requested_port_(options.serve_port),
      model_cache_limit_(options.model_cache_bytes),
      secret_(RandomSecret()) {
  ModelCacheOptions cache;
  cache.max_bytes = options.model_cache_bytes;
  cache.batcher.max_batch_size = options.max_batch_size;
  cache.batcher.max_queue_delay = absl::Microseconds(options.max_queue_delay_ms * 1000.0);
  cache.batcher.max_queued_requests = options.max_queued_requests;
  cache_ = std::make_unique<ModelCache>(cache, std::move(loader), std::make_shared<absl::Mutex>());
  service_ = std::make_unique<WorkerGenerationService>(secret_, cache_.get(), std::move(exporter));
}

ServingExtension::~ServingExtension() { Stop(); }

absl::Status ServingExtension::StartServer() {
  if (server_ != nullptr) return absl::OkStatus();
  const std::string address = absl::StrCat(host_, ":", requested_port_);
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, ServerCredentialsFor(tls_, ""), &port_);
  builder.RegisterService(service_.get());
  builder.SetMaxSendMessageSize(-1);
  // The server forwards a Generate request as it came (up to its own 16 MiB limit) plus the
  // resolved model: the default 4 MiB would refuse long condition lists the server accepted.
  builder.SetMaxReceiveMessageSize(32 << 20);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat(
        "cannot serve generation on ", address,
        " (port taken or host not local?); change --serve-port or --advertise-host, or "
        "--serve-port=-1 to turn serving off"));
  }
  endpoint_ = absl::StrCat(host_, ":", port_);
  GANTRY_LOG(INFO) << "serving generation on " << endpoint_
                   << (tls_.has_identity() ? " (TLS)" : "");
  return absl::OkStatus();
}

absl::Status ServingExtension::Start(agent::WorkerAgent& agent) {
  if (absl::Status s = StartServer(); !s.ok()) return s;
  agent.AddRegisterSource([this](gantry::v1::RegisterRequest& r) { FillRegister(r); });
  agent.AddHeartbeatSource([this](gantry::v1::Heartbeat& h) { FillHeartbeat(h); });
  metrics::MetricsRegistry& registry = metrics::ProcessMetrics();
  metrics::MetricFamily& loaded = registry.Gauge(
      "gantry_worker_loaded_models", "Generators loaded in the model cache of this daemon.");
  metrics::MetricSpec bytes_spec;
  bytes_spec.name = "gantry_worker_loaded_model_bytes";
  bytes_spec.help =
      "Memory of each loaded generator (parameters and buffers), by checkpoint (sha256 prefix).";
  bytes_spec.label_names = {"checkpoint"};
  bytes_spec.max_series = 64;
  metrics::MetricFamily& bytes = registry.Add(bytes_spec);
  metrics::MetricFamily& cache_bytes =
      registry.Gauge("gantry_worker_model_cache_bytes",
                     "Memory of all loaded generators, and the cache's limit.", {"kind"});
  metrics::MetricFamily& active = registry.Gauge("gantry_worker_generation_active_requests",
                                                 "Generate calls being served by this daemon.");
  metrics::MetricFamily& queued = registry.Gauge("gantry_worker_generation_queued_showers",
                                                 "Showers asked for and not yet generated.");
  const int64_t limit = model_cache_limit_;
  metrics_collector_ =
      registry.AddCollector([this, &loaded, &bytes, &cache_bytes, &active, &queued, limit] {
        const std::vector<ModelCache::LoadedModel> models = cache_->Snapshot();
        loaded.Set({}, static_cast<double>(models.size()));
        bytes.Clear();
        int64_t total = 0;
        int64_t waiting = 0;
        for (const ModelCache::LoadedModel& m : models) {
          bytes.Set({m.checkpoint_sha256.substr(0, 12)}, static_cast<double>(m.memory_bytes));
          total += m.memory_bytes;
          waiting += m.stats.queued_showers;
        }
        cache_bytes.Set({"loaded"}, static_cast<double>(total));
        cache_bytes.Set({"limit"}, static_cast<double>(limit));
        active.Set({}, service_->active_requests());
        queued.Set({}, static_cast<double>(waiting));
      });
  return absl::OkStatus();
}

void ServingExtension::Stop() {
  if (metrics_collector_ != 0) {
    metrics::ProcessMetrics().RemoveCollector(metrics_collector_);
    metrics_collector_ = 0;
  }
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  server_->Wait();
  server_.reset();
}

void ServingExtension::FillRegister(gantry::v1::RegisterRequest& request) const {
  request.set_generation_endpoint(endpoint_);
  request.set_generation_secret(secret_);
}

void ServingExtension::FillHeartbeat(gantry::v1::Heartbeat& heartbeat) const {
  int64_t queued = 0;
  for (const ModelCache::LoadedModel& m : cache_->Snapshot()) {
    gantry::v1::LoadedModel* out = heartbeat.add_loaded_models();
    out->set_checkpoint_sha256(m.checkpoint_sha256);
    out->set_memory_bytes(m.memory_bytes);
    out->set_warm(m.stats.batches > 0);
    out->set_active_requests(m.stats.active_requests);
    out->set_queued_showers(m.stats.queued_showers);
    out->set_pinned(m.pinned);
    *out->mutable_batching() = SettingsOf(m.batcher);
    out->set_largest_batch(m.stats.largest_batch);
    queued += m.stats.queued_showers;
  }
  heartbeat.set_generation_active_requests(service_->active_requests());
  heartbeat.set_generation_queued_showers(queued);
}

agent::DaemonExtensionFactory ServingExtensionFactory(
    std::function<ModelLoader(const agent::AgentOptions&)> make_loader,
    std::function<ModelExporter(const agent::AgentOptions&)> make_exporter) {
  return [make_loader = std::move(make_loader),
          make_exporter = std::move(make_exporter)](const agent::AgentOptions& options)
             -> absl::StatusOr<std::unique_ptr<agent::DaemonExtension>> {
    if (options.serve_port < 0) return std::unique_ptr<agent::DaemonExtension>();
    return std::unique_ptr<agent::DaemonExtension>(std::make_unique<ServingExtension>(
        options, make_loader(options), make_exporter ? make_exporter(options) : nullptr));
  };
}

}  // namespace gantry::serving
