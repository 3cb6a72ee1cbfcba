#include "workers/export/torchscript_export.h"

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/export.h>

#include <exception>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "jobspec/export_profile.h"
#include "workers/gan/conv_stage.h"

namespace gantry::exporter {
namespace {

namespace v1 = ::gantry::v1;

// A double as a TorchScript float literal that reads back exactly.
std::string Float(double d) {
  std::string s = absl::StrFormat("%.17g", d);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string Buffer(const std::string& name) {
  return absl::StrCat("self.", absl::StrReplaceAll(name, {{".", "_"}}));
}

// generate(latent, energy[, theta]): the layers of ExportOnnx, in TorchScript, with each upsampling
// stage as the polyphase conv gantry itself runs (gan::PlanPolyphase: the same function, about a
// third of the multiply-adds of upsample -> conv). Adds the polyphase weights to `buffers`.
std::string GenerateSource(const GeneratorDescription& d,
                           std::vector<std::pair<std::string, at::Tensor>>* buffers) {
  const gan::ModelConfig& c = d.config;
  std::array<int64_t, 3> size = {d.dense_shape[1], d.dense_shape[2], d.dense_shape[3]};
  std::string s = absl::StrCat(
      "def generate(self, latent: Tensor, energy: Tensor",
      c.variable_angle() ? ", theta: Tensor" : "", ") -> Tensor:\n", "    e = energy / ",
      Float(c.energy_scale), "\n",
      c.variable_angle() ? "    x = torch.cat([e, theta, latent], 1)\n" : "    x = latent * e\n",
      "    x = torch.linear(x, ", Buffer("dense.weight"), ", ", Buffer("dense.bias"), ")\n",
      "    x = x.reshape([-1, ", absl::StrJoin(d.dense_shape, ", "), "])\n");
  for (size_t i = 0; i < d.stages.size(); ++i) {
    const gan::ConvStageSpec& st = d.stages[i];
    const std::string p = absl::StrCat("stage", i, ".");
    if (st.upsample[0] != 1 || st.upsample[1] != 1 || st.upsample[2] != 1) {
      const gan::PolyphasePlan plan =
          gan::PlanPolyphase(st, d.Find(p + "conv.weight"), d.Find(p + "conv.bias"), size);
      const std::string w = absl::StrCat("stage", i, "_polyphase_weight");
      const std::string b = absl::StrCat("stage", i, "_polyphase_bias");
      buffers->emplace_back(w, plan.weight.contiguous());
      if (plan.bias.defined()) buffers->emplace_back(b, plan.bias.contiguous());
      const auto& f = plan.factor;
      const auto& q = plan.phases_size;
      const auto& o = plan.out_size;
      absl::StrAppend(
          &s, "    x = torch.constant_pad_nd(x, [", absl::StrJoin(plan.pad, ", "), "], 0.0)\n",
          "    x = torch.conv3d(x, self.", w, ", ", plan.bias.defined() ? "self." + b : "None",
          ", [1, 1, 1], [0, 0, 0], [1, 1, 1], 1)\n", "    x = x.view([-1, ", st.out_channels, ", ",
          f[0], ", ", f[1], ", ", f[2], ", ", q[0], ", ", q[1], ", ", q[2],
          "]).permute([0, 1, 5, 2, 6, 3, 7, 4]).reshape([-1, ", st.out_channels, ", ", q[0] * f[0],
          ", ", q[1] * f[1], ", ", q[2] * f[2], "])\n");
      if (q[0] * f[0] != o[0] || q[1] * f[1] != o[1] || q[2] * f[2] != o[2]) {
        absl::StrAppend(&s, "    x = x[:, :, 0:", o[0], ", 0:", o[1], ", 0:", o[2], "]\n");
      }
      size = o;
    } else {
      if (st.pad[0][0] || st.pad[0][1] || st.pad[1][0] || st.pad[1][1] || st.pad[2][0] ||
          st.pad[2][1]) {
        // constant_pad_nd takes the last dimension first.
        absl::StrAppend(&s, "    x = torch.constant_pad_nd(x, [", st.pad[2][0], ", ", st.pad[2][1],
                        ", ", st.pad[1][0], ", ", st.pad[1][1], ", ", st.pad[0][0], ", ",
                        st.pad[0][1], "], 0.0)\n");
      }
      absl::StrAppend(&s, "    x = torch.conv3d(x, ", Buffer(p + "conv.weight"), ", ",
                      st.bias ? Buffer(p + "conv.bias") : "None",
                      ", [1, 1, 1], [0, 0, 0], [1, 1, 1], 1)\n");
      for (int a = 0; a < 3; ++a) size[a] += st.pad[a][0] + st.pad[a][1] - st.kernel[a] + 1;
    }
    if (c.generator_template && i + 1 == d.stages.size()) {
      absl::StrAppend(&s, "    e5 = e.reshape([-1, 1, 1, 1, 1])\n",
                      "    cells = e5 * (self.shower_template_a + torch.log(e5) * "
                      "self.shower_template_b)\n");
      if (c.template_modes > 0) {
        absl::StrAppend(&s, "    modes = torch.matmul(latent[:, 0:", c.template_modes,
                        "] * e, self.shower_template_modes)\n",
                        "    cells = cells + modes.reshape([-1, 1, ", c.grid[0], ", ", c.grid[1],
                        ", ", c.grid[2], "])\n");
      }
      absl::StrAppend(&s, "    x = x + cells\n");
    }
    if (st.activation == gan::Activation::kRelu) {
      absl::StrAppend(&s, "    x = torch.relu(x)\n");
    } else {
      absl::StrAppend(&s, "    x = torch.leaky_relu(x, ", Float(st.leaky_slope), ")\n");
    }
    if (st.batch_norm) {
      absl::StrAppend(&s, "    x = torch.batch_norm(x, ", Buffer(p + "bn.weight"), ", ",
                      Buffer(p + "bn.bias"), ", ", Buffer(p + "bn.running_mean"), ", ",
                      Buffer(p + "bn.running_var"), ", False, 0.0, ", Float(st.bn_eps),
                      ", True)\n");
    }
  }
  absl::StrAppend(&s, "    x = x.reshape([-1, ", c.grid[0], ", ", c.grid[1], ", ", c.grid[2],
                  "])\n");
  if (c.cell_power != 1.0) {
    absl::StrAppend(&s, "    x = torch.pow(x, ", Float(1.0 / c.cell_power), ")\n");
  }
  absl::StrAppend(&s, "    return x / ", Float(c.cell_scale), "\n\n");
  return s;
}

// "assert cond, message" lines checking a 2-D input of width `width`.
std::string AssertWidth(const std::string& name, int64_t width, const std::string& what) {
  return absl::StrCat("    assert ", name, ".dim() == 2 and ", name, ".size(1) == ", width, ", \"",
                      name, " must be [N, ", width, "]: ", what, "\"\n");
}

// The module's source and the buffers it reads beyond the description's tensors.
struct Script {
  std::string source;
  std::vector<std::pair<std::string, at::Tensor>> buffers;
};

absl::StatusOr<Script> BuildScript(const GeneratorDescription& d, v1::ExportProfile profile) {
  const gan::ModelConfig& c = d.config;
  if (absl::Status s = jobspec::CheckProfileFormat(profile, v1::EXPORT_FORMAT_TORCHSCRIPT);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = jobspec::CheckProfileFitsModel(profile, c.variable_angle()); !s.ok()) {
    return s;
  }
  const int64_t l = d.noise_dim;
  const int64_t cells = c.grid[0] * c.grid[1] * c.grid[2];
  Script script;
  std::string& s = script.source;
  s = GenerateSource(d, &script.buffers);
  switch (jobspec::EffectiveProfile(profile)) {
    case v1::EXPORT_PROFILE_PAR04:
      absl::StrAppend(
          &s, "def forward(self, input: Tensor) -> Tensor:\n",
          AssertWidth("input", l + jobspec::kPar04ConditionSlots,
                      absl::StrCat(l,
                                   " latent values, E / 1024000 MeV, theta / (pi/2), 2 "
                                   "geometry slots")),
          "    latent = input[:, 0:", l, "]\n", "    energy = input[:, ", l, ":", l + 1, "] * ",
          Float(jobspec::kPar04MaxEnergyMev / jobspec::kMevPerGev), "\n",
          c.variable_angle() ? absl::StrCat("    theta = input[:, ", l + 1, ":", l + 2, "] * ",
                                            Float(jobspec::kPar04MaxAngleRad), "\n",
                                            "    shower = self.generate(latent, energy, theta)\n")
                             : "    shower = self.generate(latent, energy)\n",
          "    return (shower / energy.reshape([-1, 1, 1, 1])).reshape([-1, ", cells, "])\n");
      break;
    case v1::EXPORT_PROFILE_DDML:
      absl::StrAppend(
          &s, "def forward(self, latent: Tensor, energy: Tensor) -> Tensor:\n",
          "    n = latent.size(0)\n", "    u = latent.reshape([n, -1])\n",
          "    e = energy.reshape([n, -1])\n",
          AssertWidth("u", l, "the latent, uniform in [-1, 1], as [N, L] or [N, L, 1, 1, 1]"),
          AssertWidth("e", 1, "the energy in GeV, as [N, 1] or [N, 1, 1, 1, 1]"),
          "    z = torch.erfinv(u.clamp(", Float(-jobspec::kDdmlLatentClamp), ", ",
          Float(jobspec::kDdmlLatentClamp), ")) * 1.4142135623730951\n",
          "    shower = self.generate(z, e) * ", Float(jobspec::kMevPerGev), "\n",
          "    return shower.permute([0, 3, 1, 2]).contiguous()\n");
      break;
    default:
      absl::StrAppend(&s, "def forward(self, latent: Tensor, energy: Tensor",
                      c.variable_angle() ? ", theta: Tensor" : "", ") -> Tensor:\n",
                      AssertWidth("latent", l, "standard normal noise"),
                      AssertWidth("energy", 1, "the energy in GeV"),
                      c.variable_angle()
                          ? absl::StrCat(AssertWidth("theta", 1, "the angle in rad"),
                                         "    return self.generate(latent, energy, theta)\n")
                          : "    return self.generate(latent, energy)\n");
  }
  return script;
}

}  // namespace

absl::StatusOr<std::string> TorchScriptSource(const GeneratorDescription& d,
                                              v1::ExportProfile profile) {
  absl::StatusOr<Script> script = BuildScript(d, profile);
  if (!script.ok()) return script.status();
  return script->source;
}

absl::StatusOr<std::string> ExportTorchScript(const GeneratorDescription& d,
                                              v1::ExportProfile profile) {
  absl::StatusOr<Script> script = BuildScript(d, profile);
  if (!script.ok()) return script.status();
  try {
    torch::jit::Module module(
        absl::StrCat("gantry_generator_", jobspec::ExportProfileName(profile)));
    for (const auto& [name, tensor] : d.tensors) {
      if (name.find("num_batches_tracked") != std::string::npos) continue;
      module.register_buffer(absl::StrReplaceAll(name, {{".", "_"}}), tensor);
    }
    if (d.config.generator_template) {
      const at::Tensor t = d.Find("shower_template");
      module.register_buffer("shower_template_a", t[0].contiguous());
      module.register_buffer("shower_template_b", t[1].contiguous());
      if (d.config.template_modes > 0) {
        module.register_buffer("shower_template_modes", t.narrow(0, 2, d.config.template_modes)
                                                            .reshape({d.config.template_modes, -1})
                                                            .contiguous());
      }
    }
    for (const auto& [name, tensor] : script->buffers) module.register_buffer(name, tensor);
    module.register_attribute("gantry_description", c10::StringType::get(), DescriptionJson(d));
    module.register_attribute("gantry_profile", c10::StringType::get(),
                              jobspec::ExportProfileName(profile));
    module.define(script->source);
    module.eval();
    std::ostringstream out;
    module.save(out);
    return out.str();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("could not write the TorchScript module: ", e.what()));
  }
}

}  // namespace gantry::exporter
