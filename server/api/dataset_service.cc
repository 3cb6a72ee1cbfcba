#include "server/api/dataset_service.h"

#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/safe_text.h"
#include "base/status_macros.h"
#include "google/protobuf/util/time_util.h"
#include "server/requests/dataset_requests.h"
#include "server/requests/field_checks.h"
#include "showers/hdf5_io.h"
#include "showers/stream/generate_chunk.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

constexpr size_t kReadChunkBytes = 1 << 20;

v1::DatasetLayout ToProto(showers::Layout layout) {
  switch (layout) {
    case showers::Layout::kFixedAngle3DGan:
      return v1::DATASET_LAYOUT_3DGAN_FIXED_ANGLE;
    case showers::Layout::kVariableAngle3DGan:
      return v1::DATASET_LAYOUT_3DGAN_VARIABLE_ANGLE;
    case showers::Layout::kCaloChallenge:
      return v1::DATASET_LAYOUT_CALOCHALLENGE;
  }
  return v1::DATASET_LAYOUT_UNSPECIFIED;
}

// The upload's first message, which must carry the header within `timeout` of the call's start.
absl::StatusOr<v1::UploadDatasetHeader> ReadUploadHeader(
    grpc::ServerReader<v1::UploadDatasetRequest>& reader, StreamWatchdog::Watch& watch,
    absl::Duration timeout) {
  watch.Arm(timeout, absl::StrCat("header: none arrived within ", absl::FormatDuration(timeout),
                                  " of opening the upload; send the UploadDatasetHeader as the "
                                  "first message at once (gantry-server "
                                  "--stream-header-timeout-ms)"));
  v1::UploadDatasetRequest message;
  const bool read = reader.Read(&message);
  watch.Disarm();
  RETURN_IF_ERROR(watch.status());
  if (!read) {
    return checks::Invalid("header", "the stream is empty; send the header first");
  }
  if (!message.has_header()) {
    return absl::InvalidArgumentError(
        "header: the first message must carry the header, the file's bytes follow");
  }
  return message.header();
}

// The particle the header names, else the one the file name or the file's content suggests.
v1::Particle ParticleOf(const v1::UploadDatasetHeader& header, const showers::DatasetInfo& info) {
  v1::Particle particle = header.particle();
  if (particle == v1::PARTICLE_UNSPECIFIED) {
    particle = showers::ParticleOfFileName(showers::ParticleFromFileName(header.file_name()));
  }
  if (particle == v1::PARTICLE_UNSPECIFIED) particle = showers::ParticleOfFileName(info.particle);
  return particle;
}

// The record of an uploaded, inspected file (not yet created).
v1::Dataset DescribeDataset(const v1::UploadDatasetHeader& header, const std::string& owner,
                            const showers::DatasetInfo& info, const storage::BlobInfo& blob) {
  v1::Dataset dataset;
  dataset.set_name(header.name());
  dataset.set_owner(owner);
  dataset.set_layout(ToProto(info.layout));
  for (int64_t d : info.shape) dataset.add_shape(d);
  dataset.set_events(info.events);
  dataset.mutable_energy_range_gev()->set_min(info.energy_min_gev);
  dataset.mutable_energy_range_gev()->set_max(info.energy_max_gev);
  if (info.has_theta) {
    dataset.mutable_theta_range_rad()->set_min(info.theta_min_rad);
    dataset.mutable_theta_range_rad()->set_max(info.theta_max_rad);
  }
  dataset.set_particle(ParticleOf(header, info));
  dataset.set_sha256(blob.sha256);
  dataset.set_size_bytes(blob.size_bytes);
  dataset.mutable_labels()->insert(header.labels().begin(), header.labels().end());
  return dataset;
}

absl::Status ValidateIdOrName(const std::string& value, absl::string_view field) {
  if (absl::StartsWith(value, "ds-")) return ValidateId(value, "ds-", field);
  if (value.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": is missing"));
  return ValidateDatasetName(value, field);
}

}  // namespace

grpc::Status DatasetService::UploadDataset(grpc::ServerContext* context,
                                           grpc::ServerReader<v1::UploadDatasetRequest>* reader,
                                           v1::Dataset* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    // The tenant's stream slot first: a stream that sends nothing holds one of its own slots,
    // never a thread outside the tenant's budget.
    ASSIGN_OR_RETURN(TenantQuotas::Slot stream, quotas_.AcquireStream(p.tenant));
    // Then the watch: a header that does not come, or a pause between chunks, ends the call.
    StreamWatchdog::Watch watch = watchdog_.Begin(*context);
    ASSIGN_OR_RETURN(const v1::UploadDatasetHeader header,
                     ReadUploadHeader(*reader, watch, streams_.header_timeout));
    RETURN_IF_ERROR(ValidateUploadHeader(header, max_dataset_bytes_));
    RETURN_IF_ERROR(CheckNameIsFree(p.tenant, header.name()));
    // The upload's bytes count against the tenant while it runs, so parallel uploads cannot
    // together pass its limit.
    ASSIGN_OR_RETURN(TenantQuotas::Slot pending,
                     quotas_.ReserveUploadBytes(p.tenant, header.size_bytes()));
    ASSIGN_OR_RETURN(storage::TenantLimits limits, quotas_.LimitsOf(p.tenant));
    ASSIGN_OR_RETURN(storage::BlobInfo blob, ReceiveFile(*context, *reader, header, watch));
    absl::StatusOr<showers::DatasetInfo> info =
        inspector_.Inspect(blobs_.Path(blob.sha256), header.file_name());
    // An upload that is refused leaves its blob unreferenced: the collector deletes it after the
    // grace period (unless an identical upload uses it meanwhile). Until then its bytes still
    // count against the tenant.
    if (!info.ok()) {
      quotas_.HoldRefusedBytes(p.tenant, header.size_bytes(), absl::Now() + blob_gc_grace_);
      return info.status();
    }
    absl::StatusOr<v1::Dataset> created =
        datasets_.Create(DescribeDataset(header, p.tenant, *info, blob), limits.max_dataset_bytes,
                         storage::DatasetRepository::Blob::kPinned);
    if (!created.ok()) return created.status();
    *response = *std::move(created);
    return absl::OkStatus();
  });
}

absl::Status DatasetService::CheckNameIsFree(const std::string& tenant, const std::string& name) {
  absl::StatusOr<v1::Dataset> existing = datasets_.Get(tenant, name);
  if (existing.ok()) {
    return absl::AlreadyExistsError(absl::StrCat("header.name: you already have a dataset named \"",
                                                 BoundedField(name), "\" (", existing->id(),
                                                 "); pick another name or delete it"));
  }
  if (!absl::IsNotFound(existing.status())) return existing.status();
  return absl::OkStatus();
}

absl::StatusOr<storage::BlobInfo> DatasetService::ReceiveFile(
    grpc::ServerContext& context, grpc::ServerReader<v1::UploadDatasetRequest>& reader,
    const v1::UploadDatasetHeader& header, StreamWatchdog::Watch& watch) {
  ASSIGN_OR_RETURN(std::unique_ptr<storage::BlobWriter> writer, blobs_.NewWriter());
  const absl::Duration idle = streams_.idle_timeout;
  // Only the wait for the client's next message counts, not the server's own work between reads.
  auto read = [&](v1::UploadDatasetRequest* message) {
    watch.Arm(idle, absl::StrCat("the upload sent nothing for ", absl::FormatDuration(idle),
                                 " after ", writer->bytes_written(), " of ", header.size_bytes(),
                                 " bytes; send the file's chunks without pausing that long "
                                 "(gantry-server --stream-idle-timeout-ms)"));
    const bool got = reader.Read(message);
    watch.Disarm();
    return got;
  };
  v1::UploadDatasetRequest message;
  while (read(&message)) {
    if (!message.has_chunk()) {
      return checks::Invalid("chunk", "only the first message may carry a header");
    }
    if (static_cast<int64_t>(message.chunk().size()) > kMaxUploadChunkBytes) {
      return checks::Invalid("chunk",
                             absl::StrCat(message.chunk().size(), " bytes; send chunks of at most ",
                                          kMaxUploadChunkBytes, " bytes"));
    }
    if (writer->bytes_written() + static_cast<int64_t>(message.chunk().size()) >
        header.size_bytes()) {
      return checks::Invalid("header.size_bytes",
                             absl::StrCat(header.size_bytes(), " but more bytes arrived"));
    }
    RETURN_IF_ERROR(writer->Append(message.chunk()));
  }
  RETURN_IF_ERROR(watch.status());
  if (context.IsCancelled()) return absl::CancelledError("the upload was cancelled");
  if (writer->bytes_written() != header.size_bytes()) {
    return checks::Invalid("header.size_bytes",
                           absl::StrCat(header.size_bytes(), " but the stream ended after ",
                                        writer->bytes_written(), " bytes"));
  }
  std::optional<std::string> expected;
  if (!header.sha256().empty()) expected = header.sha256();
  // Pinned before it gets its blob name, so the collector cannot delete the bytes of this upload
  // between the rename and the dataset row that references them.
  absl::StatusOr<storage::BlobInfo> blob = writer->Commit(
      expected, [this](const std::string& sha256) { return blob_refs_.Pin(sha256); });
  if (absl::IsDataLoss(blob.status())) {
    return checks::Invalid("header.sha256", absl::StrCat(blob.status().message()));
  }
  return blob;
}

grpc::Status DatasetService::ListDatasets(grpc::ServerContext* context,
                                          const v1::ListDatasetsRequest* request,
                                          v1::ListDatasetsResponse* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    if (!request->name().empty()) RETURN_IF_ERROR(ValidateDatasetName(request->name(), "name"));
    ASSIGN_OR_RETURN(int page_size, ValidatePage(request->page(), "page"));
    ASSIGN_OR_RETURN(auto page, datasets_.List(p.tenant, request->name(), page_size,
                                               request->page().page_token()));
    for (v1::Dataset& d : page.items) *response->add_datasets() = std::move(d);
    response->set_next_page_token(page.next_page_token);
    return absl::OkStatus();
  });
}

grpc::Status DatasetService::GetDataset(grpc::ServerContext* context,
                                        const v1::GetDatasetRequest* request,
                                        v1::Dataset* response) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    RETURN_IF_ERROR(ValidateIdOrName(request->dataset_id(), "dataset_id"));
    ASSIGN_OR_RETURN(*response, datasets_.Get(p.tenant, request->dataset_id()));
    return absl::OkStatus();
  });
}

grpc::Status DatasetService::DeleteDataset(grpc::ServerContext* context,
                                           const v1::DeleteDatasetRequest* request,
                                           v1::DeleteDatasetResponse* /*response*/) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    RETURN_IF_ERROR(ValidateIdOrName(request->dataset_id(), "dataset_id"));
    // The row's blob reference goes in the same transaction; the bytes are deleted by the
    // collector once nothing has referenced them for the grace period.
    return datasets_.Delete(p.tenant, request->dataset_id()).status();
  });
}

grpc::Status DatasetService::ReadDataset(grpc::ServerContext* context,
                                         const v1::ReadDatasetRequest* request,
                                         grpc::ServerWriter<v1::DatasetChunk>* writer) {
  return auth_.Serve(context, [&](const Principal& p) -> absl::Status {
    RETURN_IF_ERROR(ValidateIdOrName(request->dataset_id(), "dataset_id"));
    if (request->offset() < 0) return checks::Invalid("offset", "must be >= 0");
    // Workers may read any dataset a job needs; a rank only its own job's.
    const std::string owner = p.worker || p.admin ? "" : p.tenant;
    if (owner.empty() && !absl::StartsWith(request->dataset_id(), "ds-")) {
      return absl::InvalidArgumentError("dataset_id: workers and admins must give the \"ds-\" id");
    }
    if (p.is_rank_credential()) {
      ASSIGN_OR_RETURN(v1::Job job, jobs_.Get("", p.rank_job));
      if (job.spec().dataset() != request->dataset_id()) {
        return absl::PermissionDeniedError(
            absl::StrCat("dataset_id: a rank credential of job ", p.rank_job,
                         " may read only that job's dataset (", job.spec().dataset(), ")"));
      }
    }
    std::optional<TenantQuotas::Slot> stream;
    if (!p.worker) {
      ASSIGN_OR_RETURN(TenantQuotas::Slot slot, quotas_.AcquireStream(p.tenant));
      stream.emplace(std::move(slot));
    }
    ASSIGN_OR_RETURN(v1::Dataset dataset, datasets_.Get(owner, request->dataset_id()));
    if (request->offset() > dataset.size_bytes()) {
      return absl::OutOfRangeError(absl::StrCat("offset: ", request->offset(),
                                                " is past the end of the file (",
                                                dataset.size_bytes(), " bytes)"));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<storage::BlobReader> blob,
                     blobs_.Open(dataset.sha256(), request->offset()));
    bool first = true;
    absl::Time next_token_check = absl::Now() + streams_.token_recheck;
    while (true) {
      if (context->IsCancelled()) return absl::CancelledError("the client cancelled the read");
      if (absl::Now() >= next_token_check) {
        RETURN_IF_ERROR(auth_.RecheckToken(*context, Audience::kTenantOrWorker));
        next_token_check = absl::Now() + streams_.token_recheck;
      }
      v1::DatasetChunk chunk;
      chunk.set_offset(blob->offset());
      ASSIGN_OR_RETURN(*chunk.mutable_data(), blob->Read(kReadChunkBytes));
      const bool end = chunk.data().empty();
      if (end && !first) return absl::OkStatus();
      chunk.set_total_bytes(dataset.size_bytes());
      if (first) chunk.set_sha256(dataset.sha256());
      first = false;
      if (!writer->Write(chunk)) return absl::OkStatus();
      if (end) return absl::OkStatus();
    }
  });
}

}  // namespace gantry::server
