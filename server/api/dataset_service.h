// DatasetService: upload (checked by a sandboxed gantry-inspect child before anything is
// recorded), list, get, delete and read back HDF5 shower datasets (gantry.v1.DatasetService).
#ifndef GANTRY_SERVER_API_DATASET_SERVICE_H_
#define GANTRY_SERVER_API_DATASET_SERVICE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gantry/v1/datasets.grpc.pb.h"
#include "server/platform/backend.h"
#include "server/platform/stream_watchdog.h"
#include "showers/sandboxed_inspector.h"
#include "storage/blob_writer.h"

namespace gantry::server {

// Thread-safe; `backend` and `watchdog` must outlive it. An upload whose header is late
// (options.streams.header_timeout) or that pauses between chunks (options.streams.idle_timeout)
// ends with DEADLINE_EXCEEDED through `watchdog`.
class DatasetService final : public gantry::v1::DatasetService::Service {
 public:
  DatasetService(Backend& backend, StreamWatchdog& watchdog)
      : backend_(backend), watchdog_(watchdog), inspector_(backend.options.inspector) {}

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

  Backend& backend_;
  StreamWatchdog& watchdog_;
  const showers::SandboxedInspector inspector_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_API_DATASET_SERVICE_H_
