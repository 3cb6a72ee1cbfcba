// ConditionFit: the fake conditions and the ecal-sum target of a model, fitted to the data it
// trains on. The reference draws fake energies over its own data's range and pins the generated
// total energy to a polynomial fit of its own data's sampling fraction; a model trained on other
// data (another detector, another energy range, the toy Monte Carlo) needs both refitted, or the
// adversarial loss (fakes where no real shower is) and the ecal-sum loss (a foreign sampling
// fraction) pull the generated energy away from the data.
#ifndef GANTRY_WORKERS_GAN_CONDITION_FIT_H_
#define GANTRY_WORKERS_GAN_CONDITION_FIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "showers/shower_file_reader.h"
#include "showers/shower_set.h"
#include "jobspec/model_config.h"

namespace gantry::gan {

// What the fit needs from the training events: every event's energy (and angle), and a sample of
// events with their preprocessed cell sums.
struct ConditionSample {
  std::vector<double> energy_gev;         // all training events
  std::vector<double> theta_rad;          // all training events (variable angle), else empty
  std::vector<double> sample_energy_gev;  // the sampled events
  std::vector<double> sample_ecal;        // their ecal sums in model units (as preprocessed)
  // Their preprocessed slice sums: per event, x + y + z values (the x slices, then y, then z).
  std::vector<double> sample_profiles;
  // Their numbers of non-zero preprocessed cells.
  std::vector<double> sample_nonzero_cells;
  // ModelConfig::generator_template only, else empty: the generator's initial shower template,
  // (2 + template_modes) x (x * y * z) values. a then b: the per-cell least-squares fit over the
  // sampled events of preprocessed cell / e = a + b ln(e), e = E / energy_scale (b = 0 when all
  // energies are equal). Then the modes M_k: the leading principal components of the sampled
  // events' deviations from that line (in cell / e), each times its standard deviation, the
  // largest entry positive; zero where the sample has fewer independent deviations.
  std::vector<double> shower_template;
};

// At most this many events are read for the sampling-fraction fit (evenly spread over the data).
inline constexpr int64_t kConditionFitEvents = 2000;

// The sample from in-memory showers (`rows` index `showers`; the event selection is applied, and
// the cells are preprocessed as for training by PreprocessEvents). INVALID_ARGUMENT when the
// showers do not fit the model (CheckShowersFitModel) or a row is outside the set.
absl::StatusOr<ConditionSample> SampleConditions(const ModelConfig& config,
                                                 const showers::ShowerSet& showers,
                                                 const std::vector<int64_t>& rows);
// The sample from a shower file: `candidates` are file indices; reads at most
// kConditionFitEvents of them (the event selection is applied to those), the same way.
absl::StatusOr<ConditionSample> SampleConditions(const ModelConfig& config,
                                                 const showers::ShowerFileReader& reader,
                                                 const std::vector<int64_t>& candidates);

// When config->fit_conditions_to_data: sets fake_energy_min/max_gev (and fake_theta_min/max_rad)
// to the data's range and ecal_fit to a least-squares polynomial (degree <= 4, fewer for few
// distinct energies) of the sampled ratio ecal / (E/energy_scale) / ecal_fit_scale, then clears
// the flag (the config now carries the fit). With profile_loss_weight > 0 it also fits
// profile_fit: per slice, the least-squares line (slice sum / e) = a + b ln e over the sampled
// events (b = 0 when all energies are equal). INVALID_ARGUMENT when the sample has no event with a
// positive energy. With generator_spots it fits generator_spot_gev: the spot energy for which
// showers drawn from the sample's shower template (at the sampled energies, modes at normal
// weights of a fixed seed) have the sampled events' mean number of non-zero cells
// (baseline::FitSpotEnergy, as the spots baseline); INVALID_ARGUMENT without a template or with
// no non-zero cell. Returns a one-line description of the fit for logs.
absl::StatusOr<std::string> FitConditionsToData(const ConditionSample& sample, ModelConfig* config);

// The polynomial least-squares fit (coefficients highest power first, as polyval); degree is
// lowered until the normal equations are well conditioned. Exposed for tests.
std::vector<double> FitPolynomial(const std::vector<double>& x, const std::vector<double>& y,
                                  int degree);

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_CONDITION_FIT_H_
