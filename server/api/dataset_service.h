// DatasetService: upload (checked by a sandboxed gantry-inspect child before anything is
// recorded), list, get, delete and read back HDF5 shower datasets (gantry.v1.DatasetService).
#ifndef GANTRY_SERVER_API_DATASET_SERVICE_H_
#define GANTRY_SERVER_API_DATASET_SERVICE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gantry/v1/datasets.grpc.pb.h"
#include "server/platform/call_auth.h"
#include "server/platform/server_options.h"
#include "server/platform/stream_watchdog.h"
#include "server/platform/tenant_quotas.h"
#include "showers/sandboxed_inspector.h"
#include "storage/blob_repository.h"
#include "storage/blob_store.h"
#include "storage/blob_writer.h"
#include "storage/dataset_repository.h"
#include "storage/job_repository.h"

namespace gantry::server {

// Thread-safe; every reference must outlive it. An upload whose header is late
// (streams.header_timeout) or that pauses between chunks (streams.idle_timeout) ends with
// DEADLINE_EXCEEDED through `watchdog`; one larger than `max_dataset_bytes` is refused; a file the
// `inspector` refuses keeps counting against the tenant for `blob_gc_grace` (until the collector
// may delete it). ReadDataset checks the token again every streams.token_recheck; a rank reads its
// job's dataset (`jobs`).
class DatasetService final : public gantry::v1::DatasetService::Service {
 public:
  DatasetService(CallAuth& auth, storage::DatasetRepository& datasets, storage::JobRepository& jobs,
                 storage::BlobStore& blobs, storage::BlobRepository& blob_refs,
                 TenantQuotas& quotas, StreamWatchdog& watchdog, const StreamOptions& streams,
                 int64_t max_dataset_bytes, absl::Duration blob_gc_grace,
                 const showers::InspectorOptions& inspector)
      : auth_(auth),
        datasets_(datasets),
        jobs_(jobs),
        blobs_(blobs),
        blob_refs_(blob_refs),
        quotas_(quotas),
        watchdog_(watchdog),
        streams_(streams),
        max_dataset_bytes_(max_dataset_bytes),
        blob_gc_grace_(blob_gc_grace),
        inspector_(inspector) {}

  grpc::Status UploadDataset(grpc::ServerContext* context,
                             grpc::ServerReader<gantry::v1::UploadDatasetRequest>* reader,
                             gantry::v1::Dataset* response) override;
  grpc::Status ListDatasets(grpc::ServerContext* context,
                            const gantry::v1::ListDatasetsRequest* request,
                            gantry::v1::ListDatasetsResponse* response) override;
  grpc::Status GetDataset(grpc::ServerContext* context,
                          const gantry::v1::GetDatasetRequest* request,
                          gantry::v1::Dataset* response) override;
  grpc::Status DeleteDataset(grpc::ServerContext* context,
                             const gantry::v1::DeleteDatasetRequest* request,
                             gantry::v1::DeleteDatasetResponse* response) override;
  grpc::Status ReadDataset(grpc::ServerContext* context,
                           const gantry::v1::ReadDatasetRequest* request,
                           grpc::ServerWriter<gantry::v1::DatasetChunk>* writer) override;

 private:
  // UploadDataset's phases: the tenant has no dataset of that name yet; the file's bytes into the
  // blob store (sha256 checked, pinned against collection before it is published).
  absl::Status CheckNameIsFree(const std::string& tenant, const std::string& name);
  absl::StatusOr<storage::BlobInfo> ReceiveFile(
      grpc::ServerContext& context, grpc::ServerReader<gantry::v1::UploadDatasetRequest>& reader,
      const gantry::v1::UploadDatasetHeader& header, StreamWatchdog::Watch& watch);

  CallAuth& auth_;
  storage::DatasetRepository& datasets_;
  storage::JobRepository& jobs_;
  storage::BlobStore& blobs_;
  storage::BlobRepository& blob_refs_;  // pins an upload's blob until its dataset references it
  TenantQuotas& quotas_;
  StreamWatchdog& watchdog_;
  const StreamOptions streams_;
  const int64_t max_dataset_bytes_;
  const absl::Duration blob_gc_grace_;
  const showers::SandboxedInspector inspector_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_API_DATASET_SERVICE_H_
