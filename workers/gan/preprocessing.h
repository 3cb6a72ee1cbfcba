// Preprocessing: the reference data normalisation between GeV ShowerSets and network tensors
// (cells x100 or ^0.85, energies /100, tiny cells zeroed), the fake-ecal target, and its inverse
// for generated showers.
#ifndef GANTRY_WORKERS_GAN_PREPROCESSING_H_
#define GANTRY_WORKERS_GAN_PREPROCESSING_H_

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "showers/shower_set.h"
#include "jobspec/model_config.h"

namespace gantry::gan {

// A preprocessed training sample, all float32 CPU tensors.
struct TrainingTensors {
  at::Tensor images;     // (N, 1, x, y, z): (cells * cell_scale)^cell_power, < threshold -> 0
  at::Tensor energy100;  // (N, 1): E / energy_scale
  at::Tensor theta;      // (N, 1) rad (variable angle), else undefined
  at::Tensor ecal;       // (N, 1): sum of the linear scaled cells (the discriminator's ecal units)
  int64_t dropped_events = 0;  // events removed by min_event_sum_gev
};

// Turns a GeV ShowerSet into training tensors (the events passing PassesEventSelection, each
// preprocessed by PreprocessEvents, so a batch preprocessed alone is bit-identical to its rows of
// the whole set). INVALID_ARGUMENT when the set's grid or layout does
// not match the model (e.g. 51x51x25 data for a 25^3 model, or no angles for 3dgan-51) or when
// no event survives the selection.
absl::StatusOr<TrainingTensors> PreprocessShowers(const ModelConfig& config,
                                                  const showers::ShowerSet& showers);

// The reference's event selection: the event's cell sum (GeV) is above config.min_event_sum_gev.
bool PassesEventSelection(const ModelConfig& config, const float* cells, int64_t cells_per_event);

// The events `rows` of `showers`, in that order and without selection, as float32 training
// tensors (dropped_events = 0). Per event and thread-independent: cells scaled, thresholded and
// raised to cell_power one by one, the ecal label summed in double. The set's grid and layout must
// already fit the config (PreprocessShowers checks them). Uses no intra-op parallelism, so any
// thread may call it.
TrainingTensors PreprocessEvents(const ModelConfig& config, const showers::ShowerSet& showers,
                                 const std::vector<int64_t>& rows);

// INVALID_ARGUMENT unless `showers` has the layout, grid, cell count and angles the config needs.
absl::Status CheckShowersFitModel(const ModelConfig& config, const showers::ShowerSet& showers);

// Network output (N, 1, x, y, z) -> GeV cells (N, x, y, z), contiguous float32.
at::Tensor UndoCellPreprocessing(const ModelConfig& config, const at::Tensor& images);

// Ecal-sum target for generated images: polyval(ecal_fit, E/100) * E/100 * ecal_fit_scale.
at::Tensor EcalTarget(const ModelConfig& config, const at::Tensor& energy100);

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_PREPROCESSING_H_
