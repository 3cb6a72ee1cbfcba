#include "workers/export/onnx_export.h"

#include <ATen/ATen.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/build_info.h"
#include "jobspec/export_profile.h"
#include "workers/gan/conv_stage.h"

namespace gantry::exporter {
namespace {

namespace v1 = ::gantry::v1;

void SetFloatTensor(onnx::TensorProto* t, const std::string& name, const at::Tensor& value) {
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (int64_t d : value.sizes()) t->add_dims(d);
  const at::Tensor v = value.to(at::kFloat).contiguous();
  t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data_ptr<float>()),
                              sizeof(float) * static_cast<size_t>(v.numel())));
}

void SetInt64Tensor(onnx::TensorProto* t, const std::string& name,
                    const std::vector<int64_t>& values) {
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(values.size()));
  for (int64_t v : values) t->add_int64_data(v);
}

void SetScalarFloat(onnx::TensorProto* t, const std::string& name, float value) {
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_float_data(value);
}

// A graph input or output as the profile describes it; the free batch dimension (-1) is "N".
void SetValueInfo(onnx::ValueInfoProto* info, const v1::ExportTensor& described) {
  info->set_name(described.name());
  info->set_doc_string(described.description());
  auto* tensor = info->mutable_type()->mutable_tensor_type();
  tensor->set_elem_type(onnx::TensorProto::FLOAT);
  auto* shape = tensor->mutable_shape();
  for (int64_t d : described.shape()) {
    auto* dim = shape->add_dim();
    if (d < 0) {
      dim->set_dim_param("N");
    } else {
      dim->set_dim_value(d);
    }
  }
}

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op, const std::string& name,
                         const std::vector<std::string>& inputs, const std::string& output) {
  onnx::NodeProto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(name);
  for (const std::string& i : inputs) n->add_input(i);
  n->add_output(output);
  return n;
}

void AddIntsAttribute(onnx::NodeProto* n, const std::string& name,
                      const std::vector<int64_t>& values) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : values) a->add_ints(v);
}

void AddIntAttribute(onnx::NodeProto* n, const std::string& name, int64_t value) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(value);
}

void AddFloatAttribute(onnx::NodeProto* n, const std::string& name, float value) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(value);
}

void AddStringAttribute(onnx::NodeProto* n, const std::string& name, const std::string& value) {
  onnx::AttributeProto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(value);
}

// A Conv node with no padding, unit strides and dilations.
void AddConv(onnx::GraphProto* g, const std::string& name, const std::vector<std::string>& inputs,
             const std::array<int64_t, 3>& kernel, const std::string& output) {
  onnx::NodeProto* conv = AddNode(g, "Conv", name, inputs, output);
  AddIntsAttribute(conv, "kernel_shape", {kernel[0], kernel[1], kernel[2]});
  AddIntsAttribute(conv, "strides", {1, 1, 1});
  AddIntsAttribute(conv, "pads", {0, 0, 0, 0, 0, 0});
  AddIntsAttribute(conv, "dilations", {1, 1, 1});
}

// Upsample -> pad -> conv of stage `p` on value `x` (spatial size *size, updated) as gantry's
// polyphase conv (gan::PlanPolyphase): crop (Slice) or pad (Pad) the coarse input, one Conv with
// every phase's weights, then Reshape / Transpose / Reshape interleave the phases and a Slice keeps
// the stage's output size. About a third of the multiply-adds of Resize -> Pad -> Conv. Returns the
// output's name.
std::string AddPolyphaseStage(onnx::GraphProto* g, const std::string& p,
                              const gan::ConvStageSpec& s, const at::Tensor& weight,
                              const at::Tensor& bias, std::string x, std::array<int64_t, 3>* size) {
  const gan::PolyphasePlan plan = gan::PlanPolyphase(s, weight, bias, *size);
  // plan.pad is F.pad order (z before, z after, y ..., x ...); negative values crop.
  std::vector<int64_t> begin(3), end(3), pads(10, 0);
  bool crop = false, pad = false;
  for (int a = 0; a < 3; ++a) {
    const int64_t before = plan.pad[2 * (2 - a)], after = plan.pad[2 * (2 - a) + 1];
    begin[a] = std::max<int64_t>(0, -before);
    end[a] = (*size)[a] - std::max<int64_t>(0, -after);
    crop = crop || before < 0 || after < 0;
    pads[2 + a] = std::max<int64_t>(0, before);
    pads[7 + a] = std::max<int64_t>(0, after);
    pad = pad || before > 0 || after > 0;
  }
  if (crop) {
    SetInt64Tensor(g->add_initializer(), p + ".crop_starts", begin);
    SetInt64Tensor(g->add_initializer(), p + ".crop_ends", end);
    SetInt64Tensor(g->add_initializer(), p + ".crop_axes", {2, 3, 4});
    AddNode(g, "Slice", p + ".crop", {x, p + ".crop_starts", p + ".crop_ends", p + ".crop_axes"},
            p + ".cropped");
    x = p + ".cropped";
  }
  if (pad) {
    SetInt64Tensor(g->add_initializer(), p + ".pads", pads);
    AddStringAttribute(AddNode(g, "Pad", p + ".pad", {x, p + ".pads"}, p + ".padded"), "mode",
                       "constant");
    x = p + ".padded";
  }
  SetFloatTensor(g->add_initializer(), p + ".polyphase.weight", plan.weight.contiguous());
  std::vector<std::string> conv_inputs = {x, p + ".polyphase.weight"};
  if (plan.bias.defined()) {
    SetFloatTensor(g->add_initializer(), p + ".polyphase.bias", plan.bias.contiguous());
    conv_inputs.push_back(p + ".polyphase.bias");
  }
  const std::array<int64_t, 3> taps = {plan.weight.size(2), plan.weight.size(3),
                                       plan.weight.size(4)};
  AddConv(g, p + ".polyphase", conv_inputs, taps, p + ".phases");
  const auto& f = plan.factor;
  const auto& q = plan.phases_size;
  const auto& o = plan.out_size;
  SetInt64Tensor(g->add_initializer(), p + ".phases_shape",
                 {-1, s.out_channels, f[0], f[1], f[2], q[0], q[1], q[2]});
  AddNode(g, "Reshape", p + ".split_phases", {p + ".phases", p + ".phases_shape"},
          p + ".phases_split");
  AddIntsAttribute(
      AddNode(g, "Transpose", p + ".interleave", {p + ".phases_split"}, p + ".interleaved"), "perm",
      {0, 1, 5, 2, 6, 3, 7, 4});
  SetInt64Tensor(g->add_initializer(), p + ".fine_shape",
                 {-1, s.out_channels, q[0] * f[0], q[1] * f[1], q[2] * f[2]});
  std::string out = p + ".conv_out";
  const bool trim = q[0] * f[0] != o[0] || q[1] * f[1] != o[1] || q[2] * f[2] != o[2];
  AddNode(g, "Reshape", p + ".merge_phases", {p + ".interleaved", p + ".fine_shape"},
          trim ? p + ".fine" : out);
  if (trim) {
    SetInt64Tensor(g->add_initializer(), p + ".trim_starts", {0, 0, 0});
    SetInt64Tensor(g->add_initializer(), p + ".trim_ends", {o[0], o[1], o[2]});
    SetInt64Tensor(g->add_initializer(), p + ".trim_axes", {2, 3, 4});
    AddNode(g, "Slice", p + ".trim",
            {p + ".fine", p + ".trim_starts", p + ".trim_ends", p + ".trim_axes"}, out);
  }
  *size = o;
  return out;
}

// The model's header: IR version, producer, opset, description and the gantry metadata.
void SetModelHeader(onnx::ModelProto* model, const GeneratorDescription& d,
                    v1::ExportProfile profile) {
  const gan::ModelConfig& c = d.config;
  model->set_ir_version(8);
  model->set_producer_name("gantry");
  model->set_producer_version(GantryVersion());
  model->set_domain("ch.cern.gantry");
  model->set_model_version(1);
  model->set_doc_string(absl::StrCat(
      "gantry 3DGAN generator (preset ", c.preset, "): latent noise and primary energy in GeV",
      c.variable_angle() ? " and angle in rad" : "", " -> shower cell energies in GeV, shape [N, ",
      c.grid[0], ", ", c.grid[1], ", ", c.grid[2], "] (z is depth)."));
  onnx::OperatorSetIdProto* opset = model->add_opset_import();
  opset->set_domain("");
  opset->set_version(kOnnxOpset);
  auto* meta = model->add_metadata_props();
  meta->set_key("gantry.description");
  meta->set_value(DescriptionJson(d));
  meta = model->add_metadata_props();
  meta->set_key("gantry.config");
  meta->set_value(gan::SerializeModelConfig(c));

  meta = model->add_metadata_props();
  meta->set_key("gantry.profile");
  meta->set_value(jobspec::ExportProfileName(profile));
}

// Par04's packed input, unpacked into the values the gantry graph reads.
void AddPar04Unpack(onnx::GraphProto* g, const GeneratorDescription& d) {
  const gan::ModelConfig& c = d.config;
  const int64_t l = d.noise_dim;
  // Columns [begin, end) of the packed input as the value `output`.
  auto slice = [&](const std::string& name, int64_t begin, int64_t end, const std::string& output) {
    SetInt64Tensor(g->add_initializer(), name + ".starts", {begin});
    SetInt64Tensor(g->add_initializer(), name + ".ends", {end});
    SetInt64Tensor(g->add_initializer(), name + ".axes", {1});
    AddNode(g, "Slice", "unpack." + name,
            {kPackedInput, name + ".starts", name + ".ends", name + ".axes"}, output);
  };
  slice(kLatentInput, 0, l, kLatentInput);
  slice(kEnergyInput, l, l + 1, std::string(kEnergyInput) + ".packed");
  SetScalarFloat(g->add_initializer(), "par04.energy_scale_gev",
                 static_cast<float>(jobspec::kPar04MaxEnergyMev / jobspec::kMevPerGev));
  AddNode(g, "Mul", "unpack.energy_gev",
          {std::string(kEnergyInput) + ".packed", "par04.energy_scale_gev"}, kEnergyInput);
  if (c.variable_angle()) {
    slice(kThetaInput, l + 1, l + 2, std::string(kThetaInput) + ".packed");
    SetScalarFloat(g->add_initializer(), "par04.angle_scale_rad",
                   static_cast<float>(jobspec::kPar04MaxAngleRad));
    AddNode(g, "Mul", "unpack.theta_rad",
            {std::string(kThetaInput) + ".packed", "par04.angle_scale_rad"}, kThetaInput);
  }
}

// Conditioning and the dense layer: E / energy_scale, then noise * E' (fixed angle) or
// [E', theta, noise], through the dense layer into the first stage's input. Returns its name.
std::string AddConditionedDense(onnx::GraphProto* g, const GeneratorDescription& d) {
  const gan::ModelConfig& c = d.config;
  SetScalarFloat(g->add_initializer(), "energy_scale", static_cast<float>(c.energy_scale));
  AddNode(g, "Div", "energy_to_network_units", {kEnergyInput, "energy_scale"}, "energy_scaled");
  if (c.variable_angle()) {
    AddIntAttribute(AddNode(g, "Concat", "condition", {"energy_scaled", kThetaInput, kLatentInput},
                            "conditioned"),
                    "axis", 1);
  } else {
    AddNode(g, "Mul", "condition", {kLatentInput, "energy_scaled"}, "conditioned");
  }
  SetFloatTensor(g->add_initializer(), "dense.weight", d.Find("dense.weight"));
  SetFloatTensor(g->add_initializer(), "dense.bias", d.Find("dense.bias"));
  onnx::NodeProto* gemm =
      AddNode(g, "Gemm", "dense", {"conditioned", "dense.weight", "dense.bias"}, "dense_out");
  AddIntAttribute(gemm, "transB", 1);
  SetInt64Tensor(g->add_initializer(), "dense_shape",
                 {-1, d.dense_shape[0], d.dense_shape[1], d.dense_shape[2], d.dense_shape[3]});
  std::string x = "stage_input";
  AddNode(g, "Reshape", "dense_reshape", {"dense_out", "dense_shape"}, x);
  return x;
}

// The shower template added to the last stage's output `x` (stage prefix `p`):
// e (a + b ln e + z_1 M_1 + ... + z_K M_K) with e = energy_scaled as [N, 1, 1, 1, 1].
std::string AddShowerTemplate(onnx::GraphProto* g, const GeneratorDescription& d,
                              const std::string& p, const std::string& x) {
  const gan::ModelConfig& c = d.config;
  const at::Tensor t = d.Find("shower_template");
  SetFloatTensor(g->add_initializer(), "shower_template.a", t[0].contiguous());
  SetFloatTensor(g->add_initializer(), "shower_template.b", t[1].contiguous());
  SetInt64Tensor(g->add_initializer(), "per_shower_shape", {-1, 1, 1, 1, 1});
  AddNode(g, "Reshape", "template.energy", {"energy_scaled", "per_shower_shape"}, "template.e");
  AddNode(g, "Log", "template.log_energy", {"template.e"}, "template.log_e");
  AddNode(g, "Mul", "template.slope", {"template.log_e", "shower_template.b"}, "template.b_log_e");
  AddNode(g, "Add", "template.shape", {"shower_template.a", "template.b_log_e"},
          "template.per_energy");
  AddNode(g, "Mul", "template.scale", {"template.e", "template.per_energy"}, "template.cells");
  std::string cells = "template.cells";
  if (c.template_modes > 0) {
    // The modes: (latent[:, :K] x e) matmul M, [K, x * y * z], reshaped to [N, 1, x, y, z].
    const int64_t k = c.template_modes;
    SetFloatTensor(g->add_initializer(), "shower_template.modes",
                   t.narrow(0, 2, k).reshape({k, -1}).contiguous());
    SetInt64Tensor(g->add_initializer(), "modes.starts", {0});
    SetInt64Tensor(g->add_initializer(), "modes.ends", {k});
    SetInt64Tensor(g->add_initializer(), "modes.axes", {1});
    SetInt64Tensor(g->add_initializer(), "modes.cell_shape",
                   {-1, 1, c.grid[0], c.grid[1], c.grid[2]});
    AddNode(g, "Slice", "modes.noise", {kLatentInput, "modes.starts", "modes.ends", "modes.axes"},
            "modes.z");
    AddNode(g, "Mul", "modes.scale", {"modes.z", "energy_scaled"}, "modes.z_e");
    AddNode(g, "MatMul", "modes.combine", {"modes.z_e", "shower_template.modes"}, "modes.flat");
    AddNode(g, "Reshape", "modes.reshape", {"modes.flat", "modes.cell_shape"}, "modes.cells");
    AddNode(g, "Add", "modes.add", {"template.cells", "modes.cells"}, "template.with_modes");
    cells = "template.with_modes";
  }
  AddNode(g, "Add", "template.add", {x, cells}, p + ".with_template");
  return p + ".with_template";
}

// Stage i of the generator on `x`: polyphase upsampling conv or padding and conv, the template
// after the last, the activation and BatchNorm. Returns the stage's output; updates *size.
std::string AddStage(onnx::GraphProto* g, const GeneratorDescription& d, size_t i, std::string x,
                     std::array<int64_t, 3>* size) {
  const gan::ModelConfig& c = d.config;
  const gan::ConvStageSpec& s = d.stages[i];
  const std::string p = absl::StrCat("stage", i);
  const bool upsample = s.upsample[0] != 1 || s.upsample[1] != 1 || s.upsample[2] != 1;
  if (upsample) {
    x = AddPolyphaseStage(g, p, s, d.Find(p + ".conv.weight"), d.Find(p + ".conv.bias"), x, size);
  }
  const bool pad = !upsample && (s.pad[0][0] || s.pad[0][1] || s.pad[1][0] || s.pad[1][1] ||
                                 s.pad[2][0] || s.pad[2][1]);
  if (pad) {
    SetInt64Tensor(
        g->add_initializer(), p + ".pads",
        {0, 0, s.pad[0][0], s.pad[1][0], s.pad[2][0], 0, 0, s.pad[0][1], s.pad[1][1], s.pad[2][1]});
    onnx::NodeProto* n = AddNode(g, "Pad", p + ".pad", {x, p + ".pads"}, p + ".padded");
    AddStringAttribute(n, "mode", "constant");
    x = p + ".padded";
  }
  if (!upsample) {
    SetFloatTensor(g->add_initializer(), p + ".conv.weight", d.Find(p + ".conv.weight"));
    std::vector<std::string> conv_inputs = {x, p + ".conv.weight"};
    if (s.bias) {
      SetFloatTensor(g->add_initializer(), p + ".conv.bias", d.Find(p + ".conv.bias"));
      conv_inputs.push_back(p + ".conv.bias");
    }
    AddConv(g, p + ".conv", conv_inputs, s.kernel, p + ".conv_out");
    x = p + ".conv_out";
    for (int a = 0; a < 3; ++a) (*size)[a] += s.pad[a][0] + s.pad[a][1] - s.kernel[a] + 1;
  }
  if (c.generator_template && i + 1 == d.stages.size()) x = AddShowerTemplate(g, d, p, x);
  if (s.activation == gan::Activation::kRelu) {
    AddNode(g, "Relu", p + ".activation", {x}, p + ".activated");
  } else {
    AddFloatAttribute(AddNode(g, "LeakyRelu", p + ".activation", {x}, p + ".activated"), "alpha",
                      static_cast<float>(s.leaky_slope));
  }
  x = p + ".activated";
  if (s.batch_norm) {
    for (const char* bn : {"weight", "bias", "running_mean", "running_var"}) {
      const std::string name = absl::StrCat(p, ".bn.", bn);
      SetFloatTensor(g->add_initializer(), name, d.Find(name));
    }
    onnx::NodeProto* bn = AddNode(
        g, "BatchNormalization", p + ".bn",
        {x, p + ".bn.weight", p + ".bn.bias", p + ".bn.running_mean", p + ".bn.running_var"},
        p + ".normalised");
    AddFloatAttribute(bn, "epsilon", static_cast<float>(s.bn_eps));
    x = p + ".normalised";
  }
  return x;
}

// (N, 1, x, y, z) in network units -> (N, x, y, z) in GeV (par04: energy fractions, flat).
void AddOutput(onnx::GraphProto* g, const GeneratorDescription& d, std::string x, bool par04) {
  const gan::ModelConfig& c = d.config;
  const int64_t cells = c.grid[0] * c.grid[1] * c.grid[2];
  SetInt64Tensor(g->add_initializer(), "shower_shape", {-1, c.grid[0], c.grid[1], c.grid[2]});
  AddNode(g, "Reshape", "drop_channel", {x, "shower_shape"}, "network_cells");
  x = "network_cells";
  if (c.cell_power != 1.0) {
    SetScalarFloat(g->add_initializer(), "inverse_cell_power",
                   static_cast<float>(1.0 / c.cell_power));
    AddNode(g, "Pow", "undo_cell_power", {x, "inverse_cell_power"}, "cells_linear");
    x = "cells_linear";
  }
  SetScalarFloat(g->add_initializer(), "cell_scale", static_cast<float>(c.cell_scale));
  if (!par04) {
    AddNode(g, "Div", "cells_to_gev", {x, "cell_scale"}, kShowerOutput);
  } else {
    AddNode(g, "Div", "cells_to_gev", {x, "cell_scale"}, "shower_gev");
    SetInt64Tensor(g->add_initializer(), "par04.energy_shape", {-1, 1, 1, 1});
    SetInt64Tensor(g->add_initializer(), "par04.flat_shape", {-1, cells});
    AddNode(g, "Reshape", "par04.energy_per_shower", {kEnergyInput, "par04.energy_shape"},
            "par04.energy");
    AddNode(g, "Div", "par04.fraction", {"shower_gev", "par04.energy"}, "par04.fractions");
    AddNode(g, "Reshape", "par04.flatten", {"par04.fractions", "par04.flat_shape"}, kShowerOutput);
  }
}

}  // namespace

absl::StatusOr<std::string> ExportOnnx(const GeneratorDescription& d, v1::ExportProfile profile) {
  const gan::ModelConfig& c = d.config;
  if (absl::Status s = jobspec::CheckProfileFormat(profile, v1::EXPORT_FORMAT_ONNX); !s.ok()) {
    return s;
  }
  if (absl::Status s = jobspec::CheckProfileFitsModel(profile, c.variable_angle()); !s.ok()) {
    return s;
  }
  const bool par04 = jobspec::EffectiveProfile(profile) == v1::EXPORT_PROFILE_PAR04;
  onnx::ModelProto model;
  SetModelHeader(&model, d, profile);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name(absl::StrCat("gantry_generator_", c.preset));
  const jobspec::ProfileInterface interface =
      jobspec::InterfaceOf(profile, c.grid, d.noise_dim, c.variable_angle());
  for (const v1::ExportTensor& t : interface.inputs) SetValueInfo(g->add_input(), t);
  for (const v1::ExportTensor& t : interface.outputs) SetValueInfo(g->add_output(), t);
  if (par04) AddPar04Unpack(g, d);
  std::string x = AddConditionedDense(g, d);
  std::array<int64_t, 3> size = {d.dense_shape[1], d.dense_shape[2], d.dense_shape[3]};
  for (size_t i = 0; i < d.stages.size(); ++i) x = AddStage(g, d, i, x, &size);
  AddOutput(g, d, x, par04);

  std::string bytes;
  if (!model.SerializeToString(&bytes)) {
    return absl::InternalError("could not serialize the ONNX model");
  }
  return bytes;
}

}  // namespace gantry::exporter
