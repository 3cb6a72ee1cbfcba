#include "workers/serving/checkpoint_model_exporter.h"

#include <iostream>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "base/log.h"
#include "jobspec/export_profile.h"
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

// The error without this worker's file paths (they reach tenants through the server); the full
// message goes to the worker's log.
absl::Status WithoutPaths(const absl::Status& status, const std::string& sha256,
                          const std::string& models_dir) {
  GANTRY_LOG(WARNING) << "export of " << sha256.substr(0, 12) << " failed: " << status;
  const std::string file = models_dir + "/" + sha256 + ".pt";
  return absl::Status(status.code(),
                      absl::StrReplaceAll(status.message(), {{file, absl::StrCat("model ", sha256)},
                                                             {models_dir, "<model cache>"}}));
}

}  // namespace

ModelExporter MakeCheckpointModelExporter(CheckpointModelLoaderOptions options) {
  return [options = std::move(options)](
             const v1::WorkerExportRequest& request) -> absl::StatusOr<ExportedFile> {
    const v1::ServedModel& model = request.model();
    absl::StatusOr<exporter::ExportFormat> format = exporter::FromProto(request.format());
    if (!format.ok()) return format.status();
    const std::string& sha = model.checkpoint_sha256();
    const absl::Time start = absl::Now();
    absl::StatusOr<std::string> path = FetchModelCheckpoint(options, sha);
    if (!path.ok()) return WithoutPaths(path.status(), sha, options.models_dir);
    absl::Status safe =
        runner::VerifyCheckpointInChild(*path, absl::StrCat("checkpoint ", sha), options.verify);
    if (!safe.ok()) return WithoutPaths(safe, sha, options.models_dir);
    absl::StatusOr<exporter::ExportedModel> exported =
        exporter::ExportCheckpoint(*path, *format, request.profile());
    if (!exported.ok()) return WithoutPaths(exported.status(), sha, options.models_dir);
    GANTRY_LOG(INFO) << "exported " << sha.substr(0, 12) << " (" << model.model_ref() << ") as "
                     << v1::ExportFormat_Name(request.format()) << " ("
                     << jobspec::ExportProfileName(request.profile()) << " profile), "
                     << exported->bytes.size() << " bytes in "
                     << absl::ToDoubleSeconds(absl::Now() - start) << " s";
    ExportedFile file;
    file.bytes = std::move(exported->bytes);
    file.metadata.set_format(request.format());
    file.metadata.set_profile(jobspec::EffectiveProfile(request.profile()));
    for (int64_t n : exported->grid) file.metadata.add_grid(n);
    file.metadata.set_variable_angle(exported->variable_angle);
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
