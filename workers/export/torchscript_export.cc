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

// generate(latent, energy[, theta]): the layers of ExportOnnx, in TorchScript.
std::string GenerateSource(const GeneratorDescription& d) {
  const gan::ModelConfig& c = d.config;
  std::string s = absl::StrCat(
      "def generate(self, latent: Tensor, energy: Tensor",
      c.variable_angle() ? ", theta: Tensor" : "", ") -> Tensor:\n",
      "    e = energy / ", Float(c.energy_scale), "\n",
      c.variable_angle() ? "    x = torch.cat([e, theta, latent], 1)\n" : "    x = latent * e\n",
      "    x = torch.linear(x, ", Buffer("dense.weight"), ", ", Buffer("dense.bias"), ")\n",
      "    x = x.reshape([-1, ", absl::StrJoin(d.dense_shape, ", "), "])\n");
  for (size_t i = 0; i < d.stages.size(); ++i) {
    const gan::ConvStageSpec& st = d.stages[i];
    const std::string p = absl::StrCat("stage", i, ".");
    if (st.upsample[0] != 1 || st.upsample[1] != 1 || st.upsample[2] != 1) {
      absl::StrAppend(&s, "    x = torch.upsample_nearest3d(x, None, [", Float(st.upsample[0]),
                      ", ", Float(st.upsample[1]), ", ", Float(st.upsample[2]), "])\n");
    }
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
  return absl::StrCat("    assert ", name, ".dim() == 2 and ", name, ".size(1) == ", width,
                      ", \"", name, " must be [N, ", width, "]: ", what, "\"\n");
}

}  // namespace

absl::StatusOr<std::string> TorchScriptSource(const GeneratorDescription& d,
                                              v1::ExportProfile profile) {
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
  std::string s = GenerateSource(d);
  switch (jobspec::EffectiveProfile(profile)) {
    case v1::EXPORT_PROFILE_PAR04:
      absl::StrAppend(
          &s, "def forward(self, input: Tensor) -> Tensor:\n",
          AssertWidth("input", l + jobspec::kPar04ConditionSlots,
                      absl::StrCat(l, " latent values, E / 1024000 MeV, theta / (pi/2), 2 "
                                      "geometry slots")),
          "    latent = input[:, 0:", l, "]\n", "    energy = input[:, ", l, ":", l + 1, "] * ",
          Float(jobspec::kPar04MaxEnergyMev / jobspec::kMevPerGev), "\n",
          c.variable_angle()
              ? absl::StrCat("    theta = input[:, ", l + 1, ":", l + 2, "] * ",
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
  return s;
}

absl::StatusOr<std::string> ExportTorchScript(const GeneratorDescription& d,
                                              v1::ExportProfile profile) {
  absl::StatusOr<std::string> source = TorchScriptSource(d, profile);
  if (!source.ok()) return source.status();
  try {
    torch::jit::Module module(absl::StrCat("gantry_generator_",
                                           jobspec::ExportProfileName(profile)));
    for (const auto& [name, tensor] : d.tensors) {
      if (name.find("num_batches_tracked") != std::string::npos) continue;
      module.register_buffer(absl::StrReplaceAll(name, {{".", "_"}}), tensor);
    }
    if (d.config.generator_template) {
      const at::Tensor t = d.Find("shower_template");
      module.register_buffer("shower_template_a", t[0].contiguous());
      module.register_buffer("shower_template_b", t[1].contiguous());
      if (d.config.template_modes > 0) {
        module.register_buffer(
            "shower_template_modes",
            t.narrow(0, 2, d.config.template_modes).reshape({d.config.template_modes, -1})
                .contiguous());
      }
    }
    module.register_attribute("gantry_description", c10::StringType::get(),
                              DescriptionJson(d));
    module.register_attribute("gantry_profile", c10::StringType::get(),
                              jobspec::ExportProfileName(profile));
    module.define(*source);
    module.eval();
    std::ostringstream out;
    module.save(out);
    return out.str();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("could not write the TorchScript module: ", e.what()));
  }
}

}  // namespace gantry::exporter
