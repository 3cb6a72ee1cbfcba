// ModelConfig: every number that defines a 3DGAN variant (architecture, losses, optimiser, data
// normalisation), with the named presets "3dgan-25", "3dgan-51", "tiny", "tiny-template",
// "tiny-spots" and "tiny-smeared".
// Torch-free.
#ifndef GANTRY_WORKERS_GAN_MODEL_CONFIG_H_
#define GANTRY_WORKERS_GAN_MODEL_CONFIG_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry::gan {

// The two reference topologies (docs/MODELS.md has the layer tables).
enum class Architecture {
  kFixedAngle25,     // reference section A: 25x25x25, multiplicative energy conditioning
  kVariableAngle51,  // reference section B: 51x51x25, input = [E/100, theta, noise]
};

// ModelConfig::template_residual_init's default.
inline constexpr double kDefaultTemplateResidualInit = 0.01;

struct ModelConfig {
  std::string preset;  // one of PresetNames(), or "custom"
  Architecture architecture = Architecture::kFixedAngle25;
  std::array<int64_t, 3> grid{25, 25, 25};  // generated image (x, y, z); z is depth

  // Generator. latent is the full input width (for 3dgan-51 it includes E/100 and theta).
  int64_t latent = 200;
  int64_t dense_channels = 8;  // channels of the reshaped Linear output
  // Conv filters in order, the final 1-filter conv excluded: 3 for kFixedAngle25, 6 for
  // kVariableAngle51.
  std::vector<int64_t> generator_filters{64, 6, 6};
  double generator_bn_eps = 1e-3;  // Keras default; 3dgan-51 uses 1e-6

  // Discriminator: the four conv filter counts.
  std::vector<int64_t> discriminator_filters{32, 8, 8, 8};
  double discriminator_bn_eps = 1e-3;
  double dropout = 0.2;
  // 0: the discriminator's conv stages see the preprocessed image. s > 0: they see
  // s * log(1 + image / s), which keeps cells below s nearly linear and compresses the core, so
  // faint cells weigh more next to it. The parameter-free heads (ecal sum, angle) and the
  // generator are unchanged.
  double discriminator_log_scale = 0.0;
  // 0: the discriminator's real/fake head reads its conv features only (the reference). H > 0:
  // a feature head adds a logit of its own, from H LeakyReLU units over each shower's high-level
  // features (ShowerFeatures: log E, log total, log sampling fraction, and per layer the energy
  // fraction and the centroid and width in x and y) and the spread of each unit over the batch
  // (a minibatch standard deviation). The discriminator then sees what the field's classifiers
  // see, given E, and a batch of showers that spread less than the data's. The batch is the
  // rank's: refused with data parallelism (world_size > 1).
  int64_t discriminator_feature_units = 0;

  // Training only: the gradient slope the generator's output ReLU passes back where it clamps a
  // cell to 0 (0: the exact ReLU gradient). A cell that is negative before the ReLU for every
  // event gets no gradient otherwise, so a whole phase of the x2 upsampled grid can stay empty
  // (docs/studies/2026-11-28-fidelity-averages.md). Generation is unchanged: the forward pass is
  // still relu(x).
  double generator_relu_grad_slope = 0.0;
  // The generator adds (E / energy_scale) x T to its output before the final ReLU, T a learned
  // per-cell template (x, y, z) that a fresh training initialises to the training data's mean
  // preprocessed shower per unit E / energy_scale (InitShowerTemplate). The mean shape is then
  // there from the first step and the conv stack learns the shower-to-shower fluctuations around
  // it, instead of first having to find a one-cell-wide centre (docs/MODELS.md "tiny-template").
  bool generator_template = false;
  // With generator_template: the generator also adds e (z_1 M_1 + ... + z_K M_K), K =
  // template_modes, z_k the first K components of its normal noise and M_k learned per-cell
  // modes. A fresh training sets them to the leading principal components of the training
  // showers' deviations from the template, each scaled by its standard deviation, so the
  // shower-to-shower fluctuations (energy, depth, width) are there from the first step too.
  int64_t template_modes = 0;
  // With generator_template: the conv stack's output is a relative correction, multiplied by the
  // mean template e (a + b ln e) (clamped at 0) before it is added. The network then moves energy
  // only where the data's mean shower has some, in proportion to it, and cannot add a haze where
  // it has none (false: added as it is, in preprocessed units).
  bool template_relative_residual = false;
  // With generator_template: whether the conv stack sees the shower's noise (true, the reference)
  // or only its energy (false: every input of the dense layer is E / 100, so the network's output
  // is one correction per energy and each shower's variety is the template modes' and the spots'
  // alone).
  bool template_residual_noise = true;
  // With generator_template: the template's learning rate (a, b and the modes) as a multiple of
  // learning_rate (1: the same; 0: frozen at its fit to the training data, and the conv stack alone
  // learns). RMSprop moves each parameter by about its learning rate a step whatever the size of
  // its gradient: at 1 a cell of the template holding a thousandth of the core's energy moves as
  // far as a core cell.
  double template_learning_rate_scale = 1.0;
  // With generator_template: the last conv's learning rate (its weights and bias: the residual the
  // network adds to the template) as a multiple of learning_rate; the conv stack below it keeps
  // the rate. With template_residual_init 0 the last conv is where training first moves a start
  // that already is the template's showers: RMSprop's first steps move each of its weights by
  // about lr / sqrt(1 - rms_rho) whatever the gradient, and every cell sums hundreds of them.
  double template_residual_learning_rate_scale = 1.0;
  // Training only: the discriminator's learning rate as a multiple of the scheduled rate (1: the
  // same as the generator's, the reference). With the base rate it sets the two networks' rates
  // apart (two time-scale updates, Heusel et al. 2017): 4 with lr / 4 keeps the discriminator's
  // steps and makes the generator's four times shorter.
  double discriminator_learning_rate_scale = 1.0;
  // With generator_template: a fresh generator's last conv starts at this times the reference's
  // initialisation. At 0.01 its output is already a haze of about a spot per cell over the whole
  // grid; at 0 the output starts at exactly 0, so a fresh generator's showers are the template's
  // and its modes' (the spots baseline), and the network learns only what the discriminator shows.
  double template_residual_init = kDefaultTemplateResidualInit;
  // Training only: weight of the generator's profile loss (0: off, the reference). The loss is
  // 100 x sum over the x, y and z slices i of |G_i - F_i| / sum_i F_i, with G_i the generated
  // batch's slice sums per unit e = E / energy_scale (preprocessed units) and F_i the same sum of
  // the fitted mean profile at the batch's energies (profile_fit): the batch's mean shower shape
  // against the training data's, tails included, which the adversarial loss alone gives away for
  // sparse showers (docs/MODELS.md "Losses and training step").
  double profile_loss_weight = 0.0;
  // Training only: the ecal-sum loss compares the batch's mean total with the mean target (MAPE of
  // the means) instead of every shower's total with its own target (false: the reference). The
  // per-shower loss pins each shower's total, so the generated sampling fraction spreads less than
  // the data's; on the batch mean it keeps the mean response and leaves the spread to the
  // adversarial loss. Per rank: with world_size > 1 each rank's batch mean.
  bool ecal_loss_batch_mean = false;
  // Training only: the weight of the energy head's loss (MAPE of the discriminator's estimate of E)
  // in the generator's updates; < 0: loss_weights[1], as in the discriminator's. Per shower, that
  // loss pulls every generated shower towards what the discriminator reads as typical of its
  // energy, as the per-shower ecal loss does its total; the discriminator's updates keep
  // loss_weights[1].
  double generator_energy_loss_weight = -1.0;
  // Training only: the generator's ecal-sum loss compares the distribution of its batch's totals
  // with the real batch's, 100 x mean_i |g_(i) - r_(i)| over the sorted ratios total / ecal target
  // of the generated (g) and real (r) showers (a 1-D Wasserstein distance, in percent): the
  // sampling fraction keeps the data's mean and its spread between showers, which neither the
  // per-shower loss (spread too narrow) nor the batch mean (spread left to the adversarial loss)
  // holds. The discriminator's updates report the batch-mean form. Excludes ecal_loss_batch_mean.
  // Per rank: each rank's batch.
  bool ecal_loss_quantiles = false;
  // Spot sampling (needs generator_template and cell_power 1): the generator's output is the
  // expected energy mu of each cell, and a shower is s Poisson(mu / s) per cell, s =
  // generator_spot_gev x cell_scale in preprocessed units, as the spots baseline draws (the Monte
  // Carlo deposits energy in discrete spots). Training passes the gradient straight through the
  // draw (d output / d mu = 1), so the discriminator sees sparse showers and the network learns
  // their expected energies. A fresh training fits s to the data: the energy for which the
  // template's showers have the training events' mean number of non-zero cells.
  bool generator_spots = false;
  // The fitted spot energy in GeV (> 0 once fitted; 0 before, or without spots).
  double generator_spot_gev = 0.0;
  // With generator_spots: the shape a of each spot's deposit. 0: every spot deposits exactly s,
  // so a cell is a whole number of spots (s Poisson(mu / s)); a > 0: each spot deposits
  // Gamma(a, s / a) (mean s; a = 1 exponential), so a cell of n spots holds Gamma(n a, s / a), a
  // continuous energy with the same mean, as a sampling calorimeter's cells (the toy Monte Carlo
  // smears each cell's spots with a Gamma too). The cell variance is s mu (1 + 1 / a).
  double generator_spot_shape = 0.0;
  // The mean profile the profile loss compares with: per slice of x, then y, then z, the
  // least-squares a_i of (slice sum / e) = a_i + b_i ln e over the sampled training events, then
  // the b_i; 2 (x + y + z) values. Fitted with the conditions (FitConditionsToData) when
  // profile_loss_weight > 0; empty otherwise.
  std::vector<double> profile_fit;

  double bn_momentum = 0.01;  // torch convention (= Keras momentum 0.99)
  double leaky_slope = 0.3;   // Keras LeakyReLU default

  // Losses: weights of [BCE, MAPE(E), MAPE(ecal)] (25) or [BCE, MAPE(E), MAE(theta), MAPE(ecal)]
  // (51).
  std::vector<double> loss_weights{2.0, 0.1, 0.1};

  // RMSprop (torch alpha = Keras rho).
  double learning_rate = 1e-3;
  double rms_rho = 0.9;
  double rms_eps = 1e-7;
  double label_flip = 0.05;     // probability to flip each discriminator label
  int64_t generator_steps = 2;  // generator updates per discriminator update
  int64_t default_batch = 128;

  // Data normalisation (applied to GeV cells and GeV energies; undone on generation).
  double cell_scale = 100.0;     // cells x cell_scale ...
  double cell_power = 1.0;       // ... then ^cell_power (0.85 for 3dgan-51)
  double energy_scale = 100.0;   // energies / energy_scale
  double cell_threshold = 1e-6;  // scaled cells below this become 0
  // Events whose raw cell sum (GeV) is <= this are dropped before training; negative keeps all.
  double min_event_sum_gev = -1.0;

  // Fake conditions: energies U(min, max) GeV, angles U(min, max) rad (51 only).
  double fake_energy_min_gev = 10.0;
  double fake_energy_max_gev = 500.0;
  double fake_theta_min_rad = 1.0471975511965976;
  double fake_theta_max_rad = 2.0943951023931953;
  // Sampling-fraction fit: ratio = polyval(ecal_fit, E/100); target ecal = ratio * E/100 *
  // ecal_fit_scale.
  std::vector<double> ecal_fit{0.0018, -0.023, 0.11, -0.28, 2.21};
  double ecal_fit_scale = 100.0;
  // Fit the fake conditions and ecal_fit to the training data when a fresh training starts
  // (FitConditionsToData); cleared once fitted, so a checkpoint carries the fitted values. False
  // keeps the values above (the reference's, fitted to its Geant4 data at 10-500 GeV).
  bool fit_conditions_to_data = true;
  // Training aborts when the discriminator's fake-batch ecal MAPE equals this (all images empty).
  double collapse_ecal_loss = 100.0;

  bool variable_angle() const { return architecture == Architecture::kVariableAngle51; }
  // Width of the latent noise per shower (the dense layer's input less the variable-angle
  // architecture's energy and angle).
  int64_t noise_dim() const { return variable_angle() ? latent - 2 : latent; }
  int64_t num_losses() const { return variable_angle() ? 4 : 3; }
  int64_t profile_slices() const { return grid[0] + grid[1] + grid[2]; }
};

// The named presets. NOT_FOUND lists the known names.
absl::StatusOr<ModelConfig> PresetConfig(absl::string_view name);
std::vector<std::string> PresetNames();

// The bounds ValidateModelConfig enforces, so a config (from a job spec or a checkpoint) cannot ask
// for networks of billions of parameters: the presets use at most latent 256, 64 filters.
inline constexpr int64_t kMaxLatent = 4096;
inline constexpr int64_t kMaxDenseChannels = 256;
inline constexpr int64_t kMaxFilters = 512;
inline constexpr int64_t kMaxTemplateModes = 64;
inline constexpr int64_t kMaxFeatureUnits = 512;
// Sum over neighbouring conv layers of in x out channels (x <= 216 kernel weights each): ~56M
// weights at most.
inline constexpr int64_t kMaxChannelPairs = 262144;
inline constexpr int64_t kMaxBatch = 65536;
inline constexpr size_t kMaxConfigTextBytes = 64 << 10;

// INVALID_ARGUMENT naming the first inconsistent or out-of-bounds field.
absl::Status ValidateModelConfig(const ModelConfig& config);

// A line-oriented "key=value" text form (stored inside checkpoints); Parse(Serialize(c)) == c.
std::string SerializeModelConfig(const ModelConfig& config);
// `config` with the fields named in `assignments` ("key=value;key=value", keys and value syntax
// as in SerializeModelConfig) replaced; INVALID_ARGUMENT for an unknown key or a config that
// ValidateModelConfig refuses.
absl::StatusOr<ModelConfig> OverrideModelConfig(const ModelConfig& config,
                                                absl::string_view assignments);
absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view text);

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_MODEL_CONFIG_H_
