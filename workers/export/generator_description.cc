#include "workers/export/generator_description.h"

#include <ATen/ATen.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "base/json_string.h"

namespace gantry::exporter {
namespace {

std::string Number(double d) { return absl::StrFormat("%.17g", d); }

absl::Status CheckShape(const GeneratorDescription& d, const std::string& name,
                        const std::vector<int64_t>& want) {
  at::Tensor t = d.Find(name);
  if (!t.defined()) return absl::InvalidArgumentError(absl::StrCat("generator has no ", name));
  if (t.sizes().vec() != want) {
    return absl::InvalidArgumentError(absl::StrCat("generator tensor ", name, " has shape [",
                                                   absl::StrJoin(t.sizes(), ","), "], want [",
                                                   absl::StrJoin(want, ","), "]"));
  }
  return absl::OkStatus();
}

}  // namespace

at::Tensor GeneratorDescription::Find(const std::string& name) const {
  for (const auto& [n, t] : tensors) {
    if (n == name) return t;
  }
  return at::Tensor();
}

absl::StatusOr<GeneratorDescription> DescribeGenerator(const gan::ModelConfig& config,
                                                       gan::GeneratorImpl& generator) {
  if (absl::Status s = gan::ValidateModelConfig(config); !s.ok()) return s;
  GeneratorDescription d;
  d.config = config;
  d.noise_dim = generator.noise_dim();
  d.dense_shape = generator.dense_shape();
  d.stages = gan::GeneratorStages(config);
  for (const auto& item : generator.named_parameters()) {
    d.tensors.emplace_back(item.key(), item.value().detach().to(at::kCPU).contiguous().clone());
  }
  for (const auto& item : generator.named_buffers()) {
    d.tensors.emplace_back(item.key(), item.value().detach().to(at::kCPU).contiguous().clone());
  }
  const int64_t dense_out =
      d.dense_shape[0] * d.dense_shape[1] * d.dense_shape[2] * d.dense_shape[3];
  if (absl::Status s = CheckShape(d, "dense.weight", {dense_out, config.latent}); !s.ok()) return s;
  if (absl::Status s = CheckShape(d, "dense.bias", {dense_out}); !s.ok()) return s;
  if (config.generator_template) {
    absl::Status s =
        CheckShape(d, "shower_template",
                   {2 + config.template_modes, config.grid[0], config.grid[1], config.grid[2]});
    if (!s.ok()) return s;
  }
  for (size_t i = 0; i < d.stages.size(); ++i) {
    const gan::ConvStageSpec& s = d.stages[i];
    const std::string p = absl::StrCat("stage", i, ".");
    absl::Status st =
        CheckShape(d, p + "conv.weight",
                   {s.out_channels, s.in_channels, s.kernel[0], s.kernel[1], s.kernel[2]});
    if (st.ok() && s.bias) st = CheckShape(d, p + "conv.bias", {s.out_channels});
    if (s.batch_norm) {
      for (const char* bn : {"weight", "bias", "running_mean", "running_var"}) {
        if (st.ok()) st = CheckShape(d, p + "bn." + bn, {s.out_channels});
      }
    }
    if (!st.ok()) return st;
    for (double f : s.upsample) {
      if (f != static_cast<double>(static_cast<int64_t>(f)) || f < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("stage ", i, " upsamples by ", f, "; only integer factors export"));
      }
    }
  }
  for (const auto& [name, t] : d.tensors) {
    if (t.scalar_type() != at::kFloat && name.find("num_batches_tracked") == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat("generator tensor ", name, " is not float32"));
    }
  }
  return d;
}

std::string DescriptionJson(const GeneratorDescription& d) {
  const gan::ModelConfig& c = d.config;
  std::vector<std::string> stages;
  for (const gan::ConvStageSpec& s : d.stages) {
    std::vector<std::string> pad;
    for (const auto& p : s.pad) pad.push_back(absl::StrCat("[", p[0], ",", p[1], "]"));
    stages.push_back(absl::StrCat(
        "{\"upsample\":[",
        absl::StrJoin(
            s.upsample, ",",
            [](std::string* o, double f) { absl::StrAppend(o, static_cast<int64_t>(f)); }),
        "],\"pad\":[", absl::StrJoin(pad, ","), "],\"in_channels\":", s.in_channels,
        ",\"out_channels\":", s.out_channels, ",\"kernel\":[", absl::StrJoin(s.kernel, ","),
        "],\"bias\":", s.bias ? "true" : "false", ",\"activation\":\"",
        s.activation == gan::Activation::kRelu ? "relu" : "leaky_relu", "\",\"leaky_slope\":",
        Number(s.leaky_slope), ",\"batch_norm\":", s.batch_norm ? "true" : "false",
        ",\"bn_eps\":", Number(s.bn_eps), "}"));
  }
  return absl::StrCat(
      "{\"format\":\"gantry-3dgan-generator\",\"format_version\":1,\"preset\":",
      JsonString(c.preset), ",\"architecture\":\"",
      c.variable_angle() ? "variable_angle_51" : "fixed_angle_25", "\",\"grid\":[",
      absl::StrJoin(c.grid, ","), "],\"noise_dim\":", d.noise_dim, ",\"latent\":", c.latent,
      ",\"dense_shape\":[", absl::StrJoin(d.dense_shape, ","),
      "],\"energy_scale\":", Number(c.energy_scale), ",\"cell_scale\":", Number(c.cell_scale),
      ",\"cell_power\":", Number(c.cell_power),
      ",\"shower_template\":", c.generator_template ? "true" : "false",
      ",\"template_modes\":", c.template_modes, ",\"stages\":[", absl::StrJoin(stages, ","),
      "],\"gantry_config\":", JsonString(gan::SerializeModelConfig(c)), "}");
}

}  // namespace gantry::exporter
