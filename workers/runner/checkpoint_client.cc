#include "workers/runner/checkpoint_client.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "base/grpc_status.h"
#include "base/sha256.h"
#include "base/status_macros.h"
#include "grpcpp/grpcpp.h"
#include "workers/runner/dataset_source.h"

namespace gantry::runner {
namespace {

constexpr size_t kChunkBytes = 1 << 20;

}  // namespace

CheckpointClient::CheckpointClient(const std::string& server, std::string token,
                                   absl::Duration timeout,
                                   std::shared_ptr<grpc::ChannelCredentials> credentials)
    : server_(server),
      token_(std::move(token)),
      timeout_(timeout),
      stub_(v1::WorkerService::NewStub(grpc::CreateChannel(
          server, credentials != nullptr ? credentials : grpc::InsecureChannelCredentials()))) {}

std::unique_ptr<grpc::ClientContext> CheckpointClient::NewContext() const {
  auto context = std::make_unique<grpc::ClientContext>();
  if (!token_.empty()) context->AddMetadata("authorization", absl::StrCat("Bearer ", token_));
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  return context;
}

absl::StatusOr<UploadedCheckpoint> CheckpointClient::Upload(const std::string& job_id, int epoch,
                                                            int64_t step, const std::string& path,
                                                            int attempt, int rank,
                                                            std::optional<double> fom) {
  ASSIGN_OR_RETURN(const std::string sha256, Sha256OfFile(path));
  std::error_code ec;
  const int64_t size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  if (ec) return absl::NotFoundError(absl::StrCat(path, ": ", ec.message()));
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, " cannot be opened"));

  auto context = NewContext();
  v1::UploadCheckpointResponse response;
  auto writer = stub_->UploadCheckpoint(context.get(), &response);
  v1::UploadCheckpointRequest header;
  v1::CheckpointHeader* h = header.mutable_header();
  h->set_job_id(job_id);
  h->set_epoch(epoch);
  h->set_step(step);
  h->set_sha256(sha256);
  h->set_size_bytes(size);
  h->set_attempt(attempt);
  h->set_rank(rank);
  if (fom.has_value()) h->set_fom(*fom);
  bool open = writer->Write(header);
  std::string buffer(kChunkBytes, '\0');
  int64_t sent = 0;
  while (open && sent < size) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const std::streamsize got = in.gcount();
    if (got <= 0) break;
    v1::UploadCheckpointRequest chunk;
    chunk.set_chunk(buffer.data(), static_cast<size_t>(got));
    open = writer->Write(chunk);
    sent += got;
  }
  if (open) writer->WritesDone();
  grpc::Status status = writer->Finish();
  if (!status.ok()) {
    return FromGrpcStatus(status, absl::StrCat("UploadCheckpoint of ", path, " to ", server_));
  }
  if (response.sha256() != sha256 || response.size_bytes() != size) {
    return absl::DataLossError(absl::StrCat("UploadCheckpoint of ", path, ": the server stored ",
                                            response.sha256(), " (", response.size_bytes(),
                                            " bytes), expected ", sha256, " (", size, " bytes)"));
  }
  return UploadedCheckpoint{sha256, size};
}

absl::Status CheckpointClient::ReportValidation(const std::string& job_id, int attempt, int rank,
                                                const v1::ValidationPoint& point) {
  auto context = NewContext();
  context->set_deadline(absl::ToChronoTime(absl::Now() + std::min(timeout_, absl::Seconds(30))));
  v1::ReportValidationRequest request;
  request.set_job_id(job_id);
  request.set_attempt(attempt);
  request.set_rank(rank);
  *request.mutable_point() = point;
  v1::ReportValidationResponse response;
  const grpc::Status status = stub_->ReportValidation(context.get(), request, &response);
  if (!status.ok()) {
    return FromGrpcStatus(status,
                          absl::StrCat("ReportValidation of step ", point.step(), " to ", server_));
  }
  return absl::OkStatus();
}

absl::StatusOr<UploadedCheckpoint> CheckpointClient::Fetch(const std::string& sha256,
                                                           const std::string& path) {
  const std::string part = path + ".part";
  std::ofstream out(part, std::ios::binary | std::ios::trunc);
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", part));
  auto context = NewContext();
  v1::FetchCheckpointRequest request;
  request.set_sha256(sha256);
  auto reader = stub_->FetchCheckpoint(context.get(), request);
  v1::CheckpointChunk chunk;
  int64_t bytes = 0;
  while (reader->Read(&chunk)) {
    out.write(chunk.data().data(), static_cast<std::streamsize>(chunk.data().size()));
    bytes += static_cast<int64_t>(chunk.data().size());
  }
  grpc::Status status = reader->Finish();
  out.close();
  std::error_code ec;
  if (!status.ok()) {
    std::filesystem::remove(part, ec);
    return FromGrpcStatus(status, absl::StrCat("FetchCheckpoint ", sha256, " from ", server_));
  }
  ASSIGN_OR_RETURN(const std::string actual, Sha256OfFile(part));
  if (actual != sha256) {
    std::filesystem::remove(part, ec);
    return absl::DataLossError(
        absl::StrCat("FetchCheckpoint ", sha256, ": received bytes hash to ", actual));
  }
  std::filesystem::rename(part, path, ec);
  if (ec) return absl::UnavailableError(absl::StrCat("cannot move ", part, ": ", ec.message()));
  return UploadedCheckpoint{sha256, bytes};
}

}  // namespace gantry::runner
