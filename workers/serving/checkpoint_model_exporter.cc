#include "workers/serving/checkpoint_model_exporter.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "workers/export/model_export.h"

namespace gantry::serving {
namespace {

namespace v1 = ::gantry::v1;

void CopyTensors(const std::vector<exporter::ExportedTensor>& tensors,
                 google::protobuf::RepeatedPtrField<v1::ExportTensor>* out) {
  for (const exporter::ExportedTensor& t : tensors) {
    v1::ExportTensor* e = out->Add();
    e->set_name(t.name);
    for (int64_t d : t.shape) e->add_shape(d);
    e->set_element_type("float32");
    e->set_description(t.description);
  }
}

}  // namespace

ModelExporter MakeCheckpointModelExporter(CheckpointModelLoaderOptions options) {
  return [options = std::move(options)](const v1::ServedModel& model,
                                        v1::ExportFormat format) -> absl::StatusOr<ExportedFile> {
    if (format != v1::EXPORT_FORMAT_ONNX && format != v1::EXPORT_FORMAT_PYTORCH) {
      return absl::InvalidArgumentError(
          absl::StrCat("format: ", format, " is not EXPORT_FORMAT_ONNX or EXPORT_FORMAT_PYTORCH"));
    }
    absl::StatusOr<std::string> path = FetchModelCheckpoint(options, model.checkpoint_sha256());
    if (!path.ok()) return path.status();
    absl::Status safe = runner::VerifyCheckpointInChild(
        *path, absl::StrCat("checkpoint ", model.checkpoint_sha256()), options.verify);
    if (!safe.ok()) return safe;
    absl::StatusOr<exporter::ExportedModel> exported = exporter::ExportCheckpointWithInterface(
        *path, format == v1::EXPORT_FORMAT_ONNX ? exporter::ExportFormat::kOnnx
                                                : exporter::ExportFormat::kPytorch);
    if (!exported.ok()) return exported.status();
    ExportedFile file;
    file.bytes = std::move(exported->bytes);
    file.metadata.set_format(format);
    CopyTensors(exported->inputs, file.metadata.mutable_inputs());
    CopyTensors(exported->outputs, file.metadata.mutable_outputs());
    return file;
  };
}

ModelExporter MakeDaemonModelExporter(const agent::AgentOptions& options) {
  std::shared_ptr<agent::CredentialSlot> credential = options.credential;
  return MakeCheckpointModelExporter({options.server, [credential] { return credential->Get(); },
                                      options.cache_dir + "/models", options.tls});
}

}  // namespace gantry::serving
