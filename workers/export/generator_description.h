// GeneratorDescription: the generator of a model as a plain layer list (dense, then upsample ->
// pad -> conv -> activation -> BatchNorm stages) with its tensors, the common input of the ONNX and
// PyTorch exporters.
#ifndef GANTRY_WORKERS_EXPORT_GENERATOR_DESCRIPTION_H_
#define GANTRY_WORKERS_EXPORT_GENERATOR_DESCRIPTION_H_

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "jobspec/export_profile.h"
#include "jobspec/model_config.h"
#include "workers/gan/conv_stage.h"
#include "workers/gan/generator.h"

namespace gantry::exporter {

// Names of the exported graph's inputs and output (jobspec/export_profile.h).
using jobspec::kEnergyInput;
using jobspec::kLatentInput;
using jobspec::kPackedInput;
using jobspec::kShowerOutput;
using jobspec::kThetaInput;

struct GeneratorDescription {
  gan::ModelConfig config;
  int64_t noise_dim = 0;                   // width of the `latent` input
  std::array<int64_t, 4> dense_shape{};    // channels, x, y, z of the reshaped Linear output
  std::vector<gan::ConvStageSpec> stages;  // in order
  // Every parameter and buffer of the generator by its LibTorch name ("dense.weight",
  // "stage0.conv.weight", "stage0.bn.running_mean", ...), detached contiguous CPU copies, in the
  // order named_parameters() then named_buffers() gives them.
  std::vector<std::pair<std::string, at::Tensor>> tensors;

  // The tensor named `name`; an undefined tensor when there is none.
  at::Tensor Find(const std::string& name) const;
};

// Describes `generator` (built from `config`). INVALID_ARGUMENT when the config does not validate
// or a tensor the layer list needs is missing or has another shape. Reads the generator only; call
// it while nobody trains it.
absl::StatusOr<GeneratorDescription> DescribeGenerator(const gan::ModelConfig& config,
                                                       gan::GeneratorImpl& generator);

// The layer list as JSON (no tensors): what the Python rebuild in clients/python/gantry_export
// reads. Keys: format, format_version, preset, architecture, grid, noise_dim, latent, dense_shape,
// energy_scale, cell_scale, cell_power, shower_template (true: the state dict's "shower_template"
// [2 + K, x, y, z] = [a, b, M_1 .. M_K] adds e (a + b ln e + z_1 M_1 + ... + z_K M_K), e = energy /
// energy_scale, z the latent, to the last stage's conv output before its activation),
// template_modes (K), stages [{upsample, pad, in_channels, out_channels, kernel, bias,
// activation, leaky_slope, batch_norm, bn_eps}], gantry_config (the key=value text).
std::string DescriptionJson(const GeneratorDescription& description);

}  // namespace gantry::exporter

#endif  // GANTRY_WORKERS_EXPORT_GENERATOR_DESCRIPTION_H_
