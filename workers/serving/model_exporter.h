// ModelExporter: how a worker turns a served model into an export file (ONNX, PyTorch or
// TorchScript, in an export profile). The
// service that streams the file is torch-free; the daemon injects the LibTorch implementation
// (checkpoint_model_exporter.h).
#ifndef GANTRY_WORKERS_SERVING_MODEL_EXPORTER_H_
#define GANTRY_WORKERS_SERVING_MODEL_EXPORTER_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "gantry/v1/catalog.pb.h"
#include "gantry/v1/worker.pb.h"

namespace gantry::serving {

// An export: the whole file and its metadata (format, inputs and outputs filled by the exporter;
// size, sha256, model_ref and checkpoint_sha256 by the service).
struct ExportedFile {
  std::string bytes;
  gantry::v1::ExportMetadata metadata;
};

// Exports request.model (its checkpoint fetched and verified as for generation) in request.format
// and request.profile (checked by the service against jobspec::CheckProfileFormat; the exporter
// checks that the profile can represent the model). Called concurrently from gRPC threads.
using ModelExporter =
    std::function<absl::StatusOr<ExportedFile>(const gantry::v1::WorkerExportRequest& request)>;

}  // namespace gantry::serving

#endif  // GANTRY_WORKERS_SERVING_MODEL_EXPORTER_H_
