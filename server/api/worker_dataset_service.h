// WorkerDatasetService: gantry.v1.DatasetService as the worker listener (--worker-listen) serves
// it: ReadDataset only, which daemons and ranks use to fill their dataset caches, answered by the
// server's DatasetService; the tenant methods (upload, list, get, delete) are UNIMPLEMENTED there.
#ifndef GANTRY_SERVER_API_WORKER_DATASET_SERVICE_H_
#define GANTRY_SERVER_API_WORKER_DATASET_SERVICE_H_

#include "gantry/v1/datasets.grpc.pb.h"
#include "server/api/dataset_service.h"

namespace gantry::server {

// Thread-safe; `datasets` must outlive it.
class WorkerDatasetService final : public gantry::v1::DatasetService::Service {
 public:
  explicit WorkerDatasetService(DatasetService& datasets) : datasets_(datasets) {}

  grpc::Status ReadDataset(grpc::ServerContext* context,
                           const gantry::v1::ReadDatasetRequest* request,
                           grpc::ServerWriter<gantry::v1::DatasetChunk>* writer) override {
    return datasets_.ReadDataset(context, request, writer);
  }

 private:
  DatasetService& datasets_;
};

}  // namespace gantry::server

#endif  // GANTRY_SERVER_API_WORKER_DATASET_SERVICE_H_
