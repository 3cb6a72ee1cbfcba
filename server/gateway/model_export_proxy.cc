#include "server/gateway/model_export_proxy.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "base/grpc_status.h"
#include "base/sha256.h"
#include "grpcpp/client_context.h"
#include "jobspec/export_profile.h"
#include "server/gateway/worker_failover.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

constexpr int kMaxTensors = 8;
constexpr int kMaxDims = 8;
constexpr size_t kMaxNameBytes = 64;
constexpr size_t kMaxTextBytes = 512;

bool IsLowerHex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool IsPrintable(const std::string& s, size_t max_bytes) {
  if (s.size() > max_bytes) return false;
  for (char c : s) {
    if (!absl::ascii_isprint(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

absl::Status CheckTensors(const google::protobuf::RepeatedPtrField<v1::ExportTensor>& tensors,
                          const char* what) {
  if (tensors.empty() || tensors.size() > kMaxTensors) {
    return absl::InternalError(
        absl::StrCat("declares ", tensors.size(), " ", what, " (1..", kMaxTensors, " allowed)"));
  }
  for (const v1::ExportTensor& t : tensors) {
    if (t.name().empty() || !IsPrintable(t.name(), kMaxNameBytes) ||
        !IsPrintable(t.element_type(), kMaxNameBytes) ||
        !IsPrintable(t.description(), kMaxTextBytes) || t.shape_size() > kMaxDims) {
      return absl::InternalError(absl::StrCat("declares a malformed ", what));
    }
    for (int64_t d : t.shape()) {
      if (d < -1 || d == 0 || d > (int64_t{1} << 20)) {
        return absl::InternalError(absl::StrCat("declares a malformed ", what, " shape"));
      }
    }
  }
  return absl::OkStatus();
}

// The worker's metadata against the request: the format and profile asked for, a size in
// (0, max], a sha256, bounded inputs and outputs, a grid of three sizes.
absl::Status CheckMetadata(const v1::ExportMetadata& m, const v1::WorkerExportRequest& work,
                           int64_t max_bytes) {
  if (m.format() != work.format()) {
    return absl::InternalError(
        absl::StrCat("answered format ", m.format(), " for ", work.format()));
  }
  if (m.profile() != work.profile()) {
    return absl::InternalError(
        absl::StrCat("answered profile ", m.profile(), " for ", work.profile()));
  }
  if (m.grid_size() != 3 || *std::min_element(m.grid().begin(), m.grid().end()) < 1 ||
      *std::max_element(m.grid().begin(), m.grid().end()) > 4096) {
    return absl::InternalError("declares no valid grid (three sizes in 1..4096)");
  }
  if (m.size_bytes() <= 0 || m.size_bytes() > max_bytes) {
    return absl::InternalError(absl::StrCat("declares ", m.size_bytes(), " bytes; at most ",
                                            max_bytes, " are accepted for this checkpoint"));
  }
  if (!IsLowerHex64(m.sha256())) return absl::InternalError("declares no valid sha256");
  if (absl::Status s = CheckTensors(m.inputs(), "inputs"); !s.ok()) return s;
  return CheckTensors(m.outputs(), "outputs");
}

}  // namespace

ModelExportProxy::ModelExportProxy(CallAuth& auth, scheduler::GenerationRouter& router,
                                   const WorkerChannelSettings& worker_channels,
                                   absl::Duration token_recheck)
    : auth_(auth),
      router_(router),
      channels_(worker_channels, static_cast<int>(kMaxChunkBytes + (64 << 10))),
      token_recheck_(token_recheck) {}

int64_t ModelExportProxy::MaxExportBytes(int64_t checkpoint_bytes) {
  return 2 * std::max<int64_t>(0, checkpoint_bytes) + (int64_t{16} << 20);
}

absl::Status ModelExportProxy::Export(grpc::ServerContext* context, const v1::ModelVersion& model,
                                      v1::ExportFormat format, v1::ExportProfile profile,
                                      grpc::ServerWriter<v1::ExportModelChunk>* writer,
                                      std::string* worker_name) {
  v1::WorkerExportRequest work;
  v1::ServedModel* served = work.mutable_model();
  served->set_checkpoint_sha256(model.checkpoint_sha256());
  served->set_checkpoint_size_bytes(model.checkpoint_size_bytes());
  served->set_model_ref(absl::StrCat(model.name(), ":", model.version()));
  *served->mutable_energy_range_gev() = model.energy_range_gev();
  *served->mutable_theta_range_rad() = model.theta_range_rad();
  work.set_format(format);
  work.set_profile(jobspec::EffectiveProfile(profile));
  const std::vector<scheduler::GenerationRouter::Candidate> candidates =
      router_.Candidates(model.checkpoint_sha256(), absl::Now());
  if (candidates.empty()) {
    return absl::UnavailableError(
        "no worker can serve the export (it runs on a serving gantry-worker); start a "
        "gantry-worker daemon joined to this server (serving is on by default) and retry");
  }
  return CallFirstReachable(router_, candidates, *context,
                            "no worker could be reached for the export", "", worker_name,
                            [&](const scheduler::GenerationRouter::Candidate& c) {
                              const Attempt a = CallWorker(context, c, work, writer);
                              return WorkerAttempt{a.status, a.messages > 0};
                            });
}

ModelExportProxy::Attempt ModelExportProxy::CallWorker(
    grpc::ServerContext* context, const scheduler::GenerationRouter::Candidate& worker,
    const v1::WorkerExportRequest& work, grpc::ServerWriter<v1::ExportModelChunk>* writer) {
  Attempt a;
  std::unique_ptr<grpc::ClientContext> ctx = grpc::ClientContext::FromServerContext(*context);
  ctx->AddMetadata("authorization", absl::StrCat("Bearer ", worker.secret));
  std::unique_ptr<grpc::ClientReader<v1::ExportModelChunk>> reader =
      channels_.StubFor(worker.endpoint).Export(ctx.get(), work);
  const int64_t max_bytes = MaxExportBytes(work.model().checkpoint_size_bytes());
  v1::ExportMetadata declared;
  Sha256 hash;
  int64_t received = 0;
  v1::ExportModelChunk chunk, held;  // `held`: the latest data chunk, not yet sent
  bool holding = false;
  absl::Status broken;   // the worker broke the protocol
  absl::Status revoked;  // the client's token, checked again while the call runs
  absl::Time checked = absl::Now();
  bool client_gone = false;
  while (reader->Read(&chunk)) {
    if (a.messages++ == 0) {
      if (!chunk.has_metadata()) {
        broken = absl::InternalError("sent data before the metadata");
      } else {
        broken = CheckMetadata(chunk.metadata(), work, max_bytes);
      }
      if (!broken.ok()) break;
      declared = chunk.metadata();
      // The server's own names, whatever the worker said.
      declared.set_model_ref(work.model().model_ref());
      declared.set_checkpoint_sha256(work.model().checkpoint_sha256());
      context->AddInitialMetadata("gantry-worker", worker.name);
      v1::ExportModelChunk first;
      *first.mutable_metadata() = declared;
      if (!writer->Write(first)) {
        client_gone = true;
        break;
      }
      continue;
    }
    if (chunk.part_case() != v1::ExportModelChunk::kData || chunk.data().empty() ||
        static_cast<int64_t>(chunk.data().size()) > kMaxChunkBytes || chunk.offset() != received ||
        received + static_cast<int64_t>(chunk.data().size()) > declared.size_bytes()) {
      broken =
          absl::InternalError(absl::StrCat("sent a malformed data chunk at offset ", received));
      break;
    }
    received += static_cast<int64_t>(chunk.data().size());
    hash.Update(chunk.data());
    if (absl::Now() - checked >= token_recheck_) {
      checked = absl::Now();
      revoked = auth_.RecheckToken(*context, Audience::kTenant);
      if (!revoked.ok()) break;
    }
    if (holding && !writer->Write(held)) {
      client_gone = true;
      break;
    }
    held.Swap(&chunk);
    holding = true;
  }
  if (!broken.ok() || !revoked.ok() || client_gone) ctx->TryCancel();
  const grpc::Status s = reader->Finish();
  if (client_gone || context->IsCancelled()) {
    a.status = absl::CancelledError("the client went away; the worker's call was cancelled");
  } else if (!revoked.ok()) {
    a.status = revoked;
  } else if (!broken.ok()) {
    a.status = absl::Status(broken.code(), absl::StrCat("worker ", worker.name, " ",
                                                        broken.message(), "; the export failed"));
  } else if (!s.ok()) {
    const absl::Status failed = FromGrpcStatus(s);
    a.status =
        absl::Status(failed.code(), absl::StrCat(failed.message(), " (worker ", worker.name, ")"));
  } else if (a.messages == 0) {
    a.status = absl::InternalError(absl::StrCat("worker ", worker.name, " sent no export"));
  } else if (received != declared.size_bytes() || hash.HexDigest() != declared.sha256()) {
    a.status = absl::DataLossError(absl::StrCat(
        "worker ", worker.name, " sent ", received, " bytes that do not match the declared ",
        declared.size_bytes(), " bytes and sha256; the export was not completed, retry"));
  } else if (absl::Status still = auth_.RecheckToken(*context, Audience::kTenant); !still.ok()) {
    a.status = still;  // revoked meanwhile: the last chunk is not sent
  } else if (!writer->Write(held)) {
    a.status = absl::CancelledError("the client went away");
  }
  return a;
}

}  // namespace gantry::server
