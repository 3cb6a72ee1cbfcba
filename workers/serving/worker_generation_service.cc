#include "workers/serving/worker_generation_service.h"

#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/grpc_status.h"
#include "base/sha256.h"
#include "jobspec/export_profile.h"
#include "workers/runner/dataset_cache.h"
#include "workers/serving/generation_plan.h"

namespace gantry::serving {
namespace {

namespace v1 = ::gantry::v1;

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "GenerateChunk.showers is little-endian float32: byte swapping is not implemented"
#endif

absl::Time Deadline(const grpc::ServerContext& context) {
  const auto deadline = context.deadline();
  if (deadline >=
      std::chrono::system_clock::time_point::max() - std::chrono::hours(24 * 365 * 100)) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

// Both strings are compared in full so the time taken says nothing about the secret.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ (i < b.size() ? b[i] : 0));
  }
  return diff == 0;
}

class ActiveCount {
 public:
  explicit ActiveCount(std::atomic<int>* n) : n_(n) { ++*n_; }
  ~ActiveCount() { --*n_; }

 private:
  std::atomic<int>* n_;
};

}  // namespace

absl::StatusOr<BatcherOptions> BatcherOptionsFrom(const v1::BatchingSettings& settings,
                                                  const BatcherOptions& defaults) {
  BatcherOptions o = defaults;
  auto check = [](const char* field, int value, int lo, int hi) -> absl::Status {
    if (value >= lo && value <= hi) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("batching.", field, ": ", value, " is out of range; give ", lo, "..", hi));
  };
  if (settings.has_max_batch_size()) {
    if (absl::Status s = check("max_batch_size", settings.max_batch_size(), 1, 4096); !s.ok())
      return s;
    o.max_batch_size = settings.max_batch_size();
  }
  if (settings.has_max_queue_delay_ms()) {
    if (absl::Status s = check("max_queue_delay_ms", settings.max_queue_delay_ms(), 0, 10000);
        !s.ok())
      return s;
    o.max_queue_delay = absl::Milliseconds(settings.max_queue_delay_ms());
  }
  if (settings.has_max_queued_requests()) {
    if (absl::Status s = check("max_queued_requests", settings.max_queued_requests(), 1, 1000000);
        !s.ok())
      return s;
    o.max_queued_requests = settings.max_queued_requests();
  }
  o.priority_levels = 1;
  if (settings.has_priority_levels()) {
    if (absl::Status s =
            check("priority_levels", settings.priority_levels(), 1, kMaxPriorityLevels);
        !s.ok())
      return s;
    o.priority_levels = settings.priority_levels();
  }
  return o;
}

v1::BatchingSettings SettingsOf(const BatcherOptions& options) {
  v1::BatchingSettings s;
  s.set_max_batch_size(options.max_batch_size);
  s.set_max_queue_delay_ms(
      static_cast<int32_t>(absl::ToInt64Milliseconds(options.max_queue_delay)));
  s.set_max_queued_requests(options.max_queued_requests);
  s.set_priority_levels(options.priority_levels);
  return s;
}

WorkerGenerationService::WorkerGenerationService(std::string secret, ModelCache* cache,
                                                 ModelExporter exporter)
    : expected_authorization_("Bearer " + std::move(secret)),
      cache_(cache),
      exporter_(std::move(exporter)) {}

bool WorkerGenerationService::Authorized(const grpc::ServerContext& context) const {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return false;
  return ConstantTimeEquals(absl::string_view(it->second.data(), it->second.size()),
                            expected_authorization_);
}

grpc::Status WorkerGenerationService::Unauthenticated() const {
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "WorkerGenerationService is only for gantry-server: send authorization: "
                      "Bearer <the generation_secret this worker registered>");
}

grpc::Status WorkerGenerationService::LoadModel(grpc::ServerContext* context,
                                                const v1::WorkerLoadModelRequest* request,
                                                v1::WorkerLoadModelResponse* response) {
  if (!Authorized(*context)) return Unauthenticated();
  absl::StatusOr<BatcherOptions> options =
      BatcherOptionsFrom(request->batching(), cache_->default_batcher());
  if (!options.ok()) return ToGrpcStatus(options.status());
  absl::StatusOr<ModelCache::PinResult> pinned = cache_->Pin(request->model(), *options);
  if (!pinned.ok()) return ToGrpcStatus(pinned.status());
  response->set_warm(true);
  response->set_memory_bytes(pinned->memory_bytes);
  response->set_load_ms(absl::ToInt64Milliseconds(pinned->load_time));
  response->set_warmup_ms(absl::ToInt64Milliseconds(pinned->warmup_time));
  *response->mutable_batching() = SettingsOf(pinned->batcher);
  return grpc::Status::OK;
}

grpc::Status WorkerGenerationService::UnloadModel(grpc::ServerContext* context,
                                                  const v1::WorkerUnloadModelRequest* request,
                                                  v1::WorkerUnloadModelResponse* response) {
  if (!Authorized(*context)) return Unauthenticated();
  const ModelCache::UnpinResult r = cache_->Unpin(request->checkpoint_sha256());
  response->set_was_loaded(r.was_loaded);
  response->set_unloaded(r.unloaded);
  return grpc::Status::OK;
}

grpc::Status WorkerGenerationService::Generate(grpc::ServerContext* context,
                                               const v1::WorkerGenerateRequest* request,
                                               grpc::ServerWriter<v1::GenerateChunk>* writer) {
  if (!Authorized(*context)) return Unauthenticated();
  ActiveCount active(&active_);
  const absl::Time deadline = Deadline(*context);
  absl::StatusOr<ModelCache::Lease> lease = cache_->Acquire(request->model());
  if (!lease.ok()) return ToGrpcStatus(lease.status());
  absl::StatusOr<GenerationPlan> plan = GenerationPlan::Create(*request, (*lease)->traits());
  if (!plan.ok()) return ToGrpcStatus(plan.status());
  const std::array<int64_t, 3> grid = (*lease)->traits().grid;
  const bool variable_angle = (*lease)->traits().variable_angle;
  const std::string model_ref = plan->model_ref();
  absl::StatusOr<std::unique_ptr<DynamicBatcher::Stream>> stream =
      (*lease)->batcher().Submit(*std::move(plan), deadline, request->request().priority());
  if (!stream.ok()) return ToGrpcStatus(stream.status());

  DynamicBatcher::Chunk chunk;
  v1::GenerateChunk message;
  while (true) {
    if (context->IsCancelled()) {
      (*stream)->Cancel();
      return grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled");
    }
    absl::StatusOr<DynamicBatcher::Stream::Poll> poll =
        (*stream)->Next(absl::Milliseconds(50), &chunk);
    if (!poll.ok()) return ToGrpcStatus(poll.status());
    if (*poll == DynamicBatcher::Stream::Poll::kDone) return grpc::Status::OK;
    if (*poll == DynamicBatcher::Stream::Poll::kWaiting) continue;
    message.Clear();
    message.mutable_showers()->assign(reinterpret_cast<const char*>(chunk.cells.data()),
                                      chunk.cells.size() * sizeof(float));
    message.add_shape(chunk.count);
    for (int64_t d : grid) message.add_shape(d);
    for (const ShowerSpec& s : chunk.showers) {
      v1::Condition* c = message.add_conditions();
      c->set_energy_gev(s.energy_gev);
      c->set_theta_rad(variable_angle ? s.theta_rad : 0.0);
    }
    message.set_offset(chunk.offset);
    message.set_model_ref(model_ref);
    if (!writer->Write(message)) {
      (*stream)->Cancel();
      return grpc::Status(grpc::StatusCode::CANCELLED, "the caller went away");
    }
  }
}

grpc::Status WorkerGenerationService::Export(grpc::ServerContext* context,
                                             const v1::WorkerExportRequest* request,
                                             grpc::ServerWriter<v1::ExportModelChunk>* writer) {
  if (!Authorized(*context)) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "WorkerGenerationService is only for gantry-server: send authorization: "
                        "Bearer <the generation_secret this worker registered>");
  }
  if (exporter_ == nullptr) {
    return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this worker does not export models");
  }
  if (absl::Status s = jobspec::CheckProfileFormat(request->profile(), request->format());
      !s.ok()) {
    return ToGrpcStatus(s);
  }
  const std::string& sha = request->model().checkpoint_sha256();
  if (!runner::IsSha256Hex(sha)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "model.checkpoint_sha256: is not a sha256 (64 lower-case hex digits)");
  }
  ActiveCount active(&active_);
  absl::StatusOr<ExportedFile> file = [&] {
    absl::MutexLock lock(&export_mu_);
    return exporter_(*request);
  }();
  if (!file.ok()) return ToGrpcStatus(file.status());
  if (context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "the call was cancelled");
  }
  const std::string& bytes = file->bytes;
  v1::ExportModelChunk chunk;
  v1::ExportMetadata* metadata = chunk.mutable_metadata();
  *metadata = std::move(file->metadata);
  metadata->set_format(request->format());
  metadata->set_profile(jobspec::EffectiveProfile(request->profile()));
  metadata->set_size_bytes(static_cast<int64_t>(bytes.size()));
  metadata->set_sha256(Sha256Hex(bytes));
  metadata->set_model_ref(request->model().model_ref());
  metadata->set_checkpoint_sha256(sha);
  if (!writer->Write(chunk)) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "the caller went away");
  }
  for (int64_t offset = 0; offset < static_cast<int64_t>(bytes.size());
       offset += kExportChunkBytes) {
    chunk.Clear();
    chunk.set_offset(offset);
    chunk.set_data(bytes.substr(offset, kExportChunkBytes));
    if (context->IsCancelled() || !writer->Write(chunk)) {
      return grpc::Status(grpc::StatusCode::CANCELLED, "the caller went away");
    }
  }
  return grpc::Status::OK;
}

}  // namespace gantry::serving
