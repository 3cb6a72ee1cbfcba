#include "workers/export/pytorch_export.h"

#include <ATen/core/Dict.h>
#include <ATen/core/ivalue.h>
#include <c10/util/Exception.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>

#include <vector>

#include "absl/strings/str_cat.h"

namespace gantry::exporter {

absl::StatusOr<std::string> ExportPytorch(const GeneratorDescription& d) {
  try {
    c10::Dict<std::string, at::Tensor> state;
    for (const auto& [name, tensor] : d.tensors) state.insert(name, tensor);
    c10::impl::GenericDict top(c10::StringType::get(), c10::AnyType::get());
    top.insert(std::string("format"), std::string("gantry-3dgan-generator"));
    top.insert(std::string("format_version"), static_cast<int64_t>(1));
    top.insert(std::string("description"), DescriptionJson(d));
    top.insert(std::string("state_dict"), state);
    // torch::pickle_save, but without the TorchScript type tags on dicts
    // (torch.jit._pickle.restore_type_tag), which torch.load(weights_only=True) refuses: the
    // archive holds only dicts, strings, ints and tensors.
    std::string pickle;
    torch::jit::Pickler pickler(
        [&pickle](const char* data, size_t size) { pickle.append(data, size); }, nullptr, nullptr,
        nullptr, nullptr, /*tag_aggregates=*/false);
    pickler.protocol();
    pickler.pushIValue(c10::IValue(top));
    pickler.stop();
    std::string archive;
    caffe2::serialize::PyTorchStreamWriter writer([&archive](const void* data, size_t size) {
      archive.append(static_cast<const char*>(data), size);
      return size;
    });
    torch::jit::writeArchiveAndTensors("data", pickle.data(), pickle.size(), pickler.tensorData(),
                                       writer);
    writer.writeEndOfFile();
    return archive;
  } catch (const c10::Error& e) {
    return absl::InternalError(
        absl::StrCat("could not write the PyTorch state dict: ", e.what_without_backtrace()));
  }
}

}  // namespace gantry::exporter
