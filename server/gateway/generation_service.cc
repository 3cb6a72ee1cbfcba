#include "server/gateway/generation_service.h"

#include <algorithm>
#include <iostream>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "base/grpc_status.h"
#include "base/log.h"
#include "base/status_details.h"
#include "base/status_macros.h"
#include "grpcpp/client_context.h"
#include "server/gateway/worker_failover.h"
#include "server/platform/rpc_metrics.h"
#include "server/platform/server_metrics.h"
#include "server/requests/generation_requests.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

// A seed for a request that gave none: never 0 (0 means "draw one").
uint64_t DrawSeed() {
  thread_local std::mt19937_64 engine(std::random_device{}() ^
                                      static_cast<uint64_t>(absl::ToUnixNanos(absl::Now())));
  uint64_t seed = 0;
  while (seed == 0) seed = engine();
  return seed;
}

int64_t CountOf(const v1::GenerateRequest& request) {
  return request.has_list() ? request.list().items_size() : request.range().count();
}

// Showers in a chunk: its first dimension, else one per condition.
int64_t ShowersIn(const v1::GenerateChunk& chunk) {
  return chunk.shape_size() > 0 ? chunk.shape(0) : chunk.conditions_size();
}

}  // namespace

bool GenerationService::WriteWithinLimit(const v1::GenerateChunk& chunk,
                                         grpc::ServerWriter<v1::GenerateChunk>* writer) {
  // What the server may send in one message, less room for the fields around the showers.
  const int64_t limit = max_message_bytes_ - (64 << 10);
  const int64_t n = chunk.shape_size() > 0 ? chunk.shape(0) : 0;
  if (static_cast<int64_t>(chunk.ByteSizeLong()) <= limit || n <= 1 ||
      chunk.showers().size() % n != 0 || chunk.conditions_size() != n) {
    return writer->Write(chunk);
  }
  // Too big for one message (e.g. 1024 showers of 51x51x25 cells): split it by showers, each
  // part a valid chunk with its own offset and conditions.
  const int64_t per_shower = static_cast<int64_t>(chunk.showers().size()) / n;
  const int64_t per_part = std::max<int64_t>(1, limit / std::max<int64_t>(1, per_shower + 64));
  v1::GenerateChunk part;
  for (int64_t first = 0; first < n; first += per_part) {
    const int64_t k = std::min(per_part, n - first);
    part.Clear();
    part.set_showers(chunk.showers().substr(first * per_shower, k * per_shower));
    part.add_shape(k);
    for (int i = 1; i < chunk.shape_size(); ++i) part.add_shape(chunk.shape(i));
    for (int64_t i = first; i < first + k; ++i) *part.add_conditions() = chunk.conditions(i);
    part.set_offset(chunk.offset() + first);
    part.set_model_ref(chunk.model_ref());
    if (!writer->Write(part)) return false;
  }
  return true;
}

grpc::Status GenerationService::Generate(grpc::ServerContext* context,
                                         const v1::GenerateRequest* request,
                                         grpc::ServerWriter<v1::GenerateChunk>* writer) {
  const absl::Time start = absl::Now();
  std::string model_ref = request->model(), worker = "-", tenant = "-";
  uint64_t seed = request->seed();
  int64_t sent = 0;  // showers streamed to the client
  grpc::Status status = auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    tenant = p.tenant;
    ASSIGN_OR_RETURN(const storage::TenantLimits limits, quotas_.LimitsOf(p.tenant));
    RETURN_IF_ERROR(ValidateGenerateRequest(*request, limits.max_showers_per_request));
    absl::StatusOr<v1::ModelVersion> model = resolver_.ResolveModel(p.tenant, request->model());
    if (!model.ok()) {
      return absl::Status(model.status().code(), absl::StrCat("model: ", model.status().message()));
    }
    RETURN_IF_ERROR(ValidateGenerateForModel(*request, *model));
    ASSIGN_OR_RETURN(TenantQuotas::Slot stream, quotas_.AcquireStream(p.tenant));
    ASSIGN_OR_RETURN(TenantQuotas::Slot generating, quotas_.AcquireGenerationStream(p.tenant));
    RETURN_IF_ERROR(quotas_.TakeShowers(p.tenant, CountOf(*request)));
    model_ref = absl::StrCat(model->name(), ":", model->version());
    if (seed == 0) seed = DrawSeed();
    context->AddInitialMetadata("gantry-seed", absl::StrCat(seed));

    v1::WorkerGenerateRequest work;
    v1::ServedModel* served = work.mutable_model();
    served->set_checkpoint_sha256(model->checkpoint_sha256());
    served->set_checkpoint_size_bytes(model->checkpoint_size_bytes());
    served->set_model_ref(model_ref);
    *served->mutable_energy_range_gev() = model->energy_range_gev();
    *served->mutable_theta_range_rad() = model->theta_range_rad();
    *work.mutable_request() = *request;
    work.mutable_request()->set_seed(seed);
    absl::Status routed = Route(context, work, CountOf(*request), writer, &worker, &sent);
    // Showers that never reached the client go back into the tenant's bucket.
    if (!routed.ok()) quotas_.ReturnShowers(p.tenant, CountOf(*request) - sent);
    return routed;
  });
  const ServerMetrics& metrics = GetServerMetrics();
  const std::string code = StatusCodeName(status.error_code());
  metrics.generation_requests.Increment({code});
  metrics.generation_showers.Increment({}, static_cast<double>(sent));
  metrics.generation_seconds.Observe({code}, absl::ToDoubleSeconds(absl::Now() - start));
  GANTRY_LOG(INFO) << "generate " << model_ref << " tenant=" << tenant
                   << " count=" << CountOf(*request) << " seed=" << seed << " worker=" << worker
                   << " " << absl::ToDoubleSeconds(absl::Now() - start) << " s: "
                   << (status.ok()
                           ? "OK"
                           : absl::StrCat(status.error_code(), " ", status.error_message()));
  return status;
}

absl::Status GenerationService::Route(grpc::ServerContext* context,
                                      const v1::WorkerGenerateRequest& work, int64_t count,
                                      grpc::ServerWriter<v1::GenerateChunk>* writer,
                                      std::string* worker_name, int64_t* showers_sent) {
  *showers_sent = 0;
  const std::vector<scheduler::GenerationRouter::Candidate> candidates =
      router_.Candidates(work.model().checkpoint_sha256(), absl::Now());
  if (candidates.empty()) {
    return SetErrorReason(
        absl::UnavailableError(
            "no worker serves generation; start a gantry-worker daemon joined to this server "
            "(serving is on by default) and retry"),
        "NO_SERVING_WORKER");
  }
  // Only a worker that never answered is replaced: once a chunk went out the client has part of
  // the result, and any other error is the worker's verdict on the request.
  Attempt last;
  absl::Status status = CallFirstReachable(
      router_, candidates, *context, "no generation worker could be reached", "NO_SERVING_WORKER",
      worker_name, [&](const scheduler::GenerationRouter::Candidate& c) {
        last = CallWorker(context, c, work, count, writer);
        return WorkerAttempt{last.status, last.chunks > 0};
      });
  *showers_sent = last.showers;
  return status;
}

GenerationService::Attempt GenerationService::CallWorker(
    grpc::ServerContext* context, const scheduler::GenerationRouter::Candidate& worker,
    const v1::WorkerGenerateRequest& work, int64_t count,
    grpc::ServerWriter<v1::GenerateChunk>* writer) {
  Attempt a;
  // Deadline and cancellation propagate from the client's call to the worker's.
  std::unique_ptr<grpc::ClientContext> ctx = grpc::ClientContext::FromServerContext(*context);
  ctx->AddMetadata("authorization", absl::StrCat("Bearer ", worker.secret));
  router_.Begin(worker.worker_id, work.model().checkpoint_sha256(), count);
  std::unique_ptr<grpc::ClientReader<v1::GenerateChunk>> reader =
      channels_.StubFor(worker.endpoint).Generate(ctx.get(), work);
  // A guard checks the client's token again while the call runs (also while it waits for the
  // worker or for the client's flow control) and cancels the worker's call once it is revoked.
  absl::Notification call_done;
  absl::Mutex revoked_mu;
  absl::Status revoked;
  std::thread token_guard([&] {
    while (!call_done.WaitForNotificationWithTimeout(token_recheck_)) {
      absl::Status still = auth_.RecheckToken(*context, Audience::kTenant);
      if (!still.ok()) {
        {
          absl::MutexLock lock(&revoked_mu);
          revoked = still;
        }
        ctx->TryCancel();
        return;
      }
    }
  });
  v1::GenerateChunk chunk;
  bool client_gone = false;
  while (reader->Read(&chunk)) {
    const int64_t n = ShowersIn(chunk);
    router_.Received(worker.worker_id, n);
    a.showers += n;
    if (a.chunks++ == 0) context->AddInitialMetadata("gantry-worker", worker.name);
    if (chunk.model_ref().empty()) chunk.set_model_ref(work.model().model_ref());
    // Blocks while the client's flow-control window is full; the worker's stream waits with it.
    if (!WriteWithinLimit(chunk, writer)) {
      client_gone = true;
      ctx->TryCancel();
      break;
    }
  }
  const grpc::Status s = reader->Finish();
  call_done.Notify();
  token_guard.join();
  router_.End(worker.worker_id, std::max<int64_t>(0, count - a.showers));
  absl::MutexLock lock(&revoked_mu);
  if (!revoked.ok()) {
    a.status = revoked;
  } else if (client_gone || context->IsCancelled()) {
    a.status = absl::CancelledError("the client went away; the worker's call was cancelled");
  } else if (!s.ok()) {
    const absl::Status failed = FromGrpcStatus(s);
    a.status =
        absl::Status(failed.code(), absl::StrCat(failed.message(), " (worker ", worker.name, ")"));
  } else if (a.showers != count) {
    a.status = absl::InternalError(absl::StrCat("worker ", worker.name, " returned ", a.showers,
                                                " showers for a request of ", count));
  }
  return a;
}

}  // namespace gantry::server
