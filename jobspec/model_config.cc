#include "jobspec/model_config.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace gantry::gan {
namespace {

ModelConfig Fixed25() { return ModelConfig{}; }  // the struct defaults are the 3dgan-25 reference

ModelConfig Variable51() {
  ModelConfig c;
  c.preset = "3dgan-51";
  c.architecture = Architecture::kVariableAngle51;
  c.grid = {51, 51, 25};
  c.latent = 256;
  c.dense_channels = 8;
  c.generator_filters = {8, 6, 6, 6, 6, 6};
  c.generator_bn_eps = 1e-6;
  c.discriminator_filters = {16, 8, 8, 8};
  c.loss_weights = {3.0, 0.1, 25.0, 0.1};
  c.default_batch = 64;
  c.cell_scale = 1.0;
  c.cell_power = 0.85;
  c.ecal_fit_scale = 1.0;     // the ecal head sums image^(1/0.85), i.e. GeV
  c.min_event_sum_gev = 0.0;  // see docs/MODELS.md: the reference's "sum > 10" is in its file units
  return c;
}

// Same topology as 3dgan-25, tuned for runs of a few hundred steps (docs/MODELS.md): few generator
// filters, a discriminator of 8 filters (fewer cost as much on oneDNN and learn nothing), faster
// BatchNorm running statistics, and more weight on the adversarial loss.
ModelConfig Tiny() {
  ModelConfig c;
  c.preset = "tiny";
  c.latent = 16;
  c.dense_channels = 4;
  c.generator_filters = {8, 4, 4};
  c.discriminator_filters = {8, 8, 8, 8};
  c.default_batch = 8;
  c.bn_momentum = 0.1;
  c.loss_weights = {6.0, 0.02, 0.1};
  return c;
}

// tiny with a shower template (ModelConfig::generator_template) and 2 fluctuation modes: the
// generator starts from the training data's mean shower and its leading shower-to-shower
// fluctuations, and learns the rest, which a few hundred steps can do; the plain topology first
// has to find the one-cell-wide centre (docs/MODELS.md "tiny-template"). A 128-dimensional latent,
// the loss weights of the fidelity study, and the profile loss, which keeps the mean shower's
// transverse tails that adversarial training alone removes.
ModelConfig TinyTemplate() {
  ModelConfig c = Tiny();
  c.preset = "tiny-template";
  c.generator_template = true;
  c.template_modes = 2;
  c.latent = 128;
  c.loss_weights = {6.0, 0.1, 0.4};
  c.profile_loss_weight = 0.4;
  return c;
}

// tiny-template drawing its showers as spots (ModelConfig::generator_spots), as the Monte Carlo
// deposits them, with the ecal-sum loss on the batch mean (which leaves each shower's total free,
// so the sampling fraction keeps its spread): the recipe of the field study
// (docs/MODELS.md "Fidelity").
ModelConfig TinySpots() {
  ModelConfig c = TinyTemplate();
  c.preset = "tiny-spots";
  c.generator_spots = true;
  c.ecal_loss_batch_mean = true;
  return c;
}

// tiny-spots started at the smeared-spots baseline and moved slowly (docs/MODELS.md "Fidelity"):
// each spot deposits an exponential energy (generator_spot_shape 1), the template and its modes
// stay as fitted to the data (template_learning_rate_scale 0), the last conv starts at zero
// (template_residual_init 0: the untrained generator draws the smeared-spots baseline's showers),
// and the generator's steps are a quarter of the discriminator's (rate 7.5e-5, the
// discriminator's 4 times that), which halves what training wears off the start.
ModelConfig TinySmeared() {
  ModelConfig c = TinySpots();
  c.preset = "tiny-smeared";
  c.generator_spot_shape = 1.0;
  c.template_learning_rate_scale = 0.0;
  c.template_residual_init = 0.0;
  c.discriminator_learning_rate_scale = 4.0;
  c.learning_rate = 7.5e-5;
  return c;
}

std::string Join(const std::vector<int64_t>& v) { return absl::StrJoin(v, ","); }
std::string Join(const std::vector<double>& v) {
  return absl::StrJoin(v, ",", [](std::string* out, double d) {
    absl::StrAppend(out, absl::StrFormat("%.17g", d));
  });
}

}  // namespace

absl::StatusOr<ModelConfig> PresetConfig(absl::string_view name) {
  if (name == "3dgan-25") {
    ModelConfig c = Fixed25();
    c.preset = "3dgan-25";
    return c;
  }
  if (name == "3dgan-51") return Variable51();
  if (name == "tiny") return Tiny();
  if (name == "tiny-template") return TinyTemplate();
  if (name == "tiny-spots") return TinySpots();
  if (name == "tiny-smeared") return TinySmeared();
  return absl::NotFoundError(absl::StrCat("unknown model preset \"", name,
                                          "\"; known: ", absl::StrJoin(PresetNames(), ", ")));
}

std::vector<std::string> PresetNames() {
  return {"3dgan-25", "3dgan-51", "tiny", "tiny-template", "tiny-spots", "tiny-smeared"};
}

namespace {

// "invalid model config: <what>" as InvalidArgument.
absl::Status Bad(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("invalid model config: ", what));
}

// Checks the grid, the latent size, the dense channels and the generator and discriminator filters.
absl::Status CheckLayerSizes(const ModelConfig& c) {
  const bool v = c.variable_angle();
  const std::array<int64_t, 3> want_grid =
      v ? std::array<int64_t, 3>{51, 51, 25} : std::array<int64_t, 3>{25, 25, 25};
  if (c.grid != want_grid) return Bad("grid must be 25x25x25 (fixed angle) or 51x51x25 (variable)");
  if (c.latent < (v ? 3 : 1)) return Bad("latent too small");
  if (c.latent > kMaxLatent) return Bad(absl::StrCat("latent must be <= ", kMaxLatent));
  if (c.dense_channels < 1) return Bad("dense_channels must be >= 1");
  if (c.dense_channels > kMaxDenseChannels) {
    return Bad(absl::StrCat("dense_channels must be <= ", kMaxDenseChannels));
  }
  if (c.generator_filters.size() != (v ? 6u : 3u)) {
    return Bad(v ? "generator_filters needs 6 entries" : "generator_filters needs 3 entries");
  }
  for (int64_t f : c.generator_filters) {
    if (f < 1) return Bad("generator_filters must be >= 1");
    if (f > kMaxFilters) return Bad(absl::StrCat("generator_filters must be <= ", kMaxFilters));
  }
  if (c.discriminator_filters.size() != 4u) return Bad("discriminator_filters needs 4 entries");
  for (int64_t f : c.discriminator_filters) {
    if (f < 1) return Bad("discriminator_filters must be >= 1");
    if (f > kMaxFilters) {
      return Bad(absl::StrCat("discriminator_filters must be <= ", kMaxFilters));
    }
  }
  return absl::OkStatus();
}

// Checks the channel pairs the conv layers connect (they bound the conv weights).
absl::Status CheckChannelPairs(const ModelConfig& c) {
  // Neighbouring conv layers: their channel products bound the conv weights (kernels <= 6^3).
  int64_t pairs = c.dense_channels * c.generator_filters.front();
  for (size_t i = 1; i < c.generator_filters.size(); ++i) {
    pairs += c.generator_filters[i - 1] * c.generator_filters[i];
  }
  for (size_t i = 1; i < c.discriminator_filters.size(); ++i) {
    pairs += c.discriminator_filters[i - 1] * c.discriminator_filters[i];
  }
  if (pairs > kMaxChannelPairs) {
    return Bad(absl::StrCat("the conv layers connect ", pairs, " channel pairs; at most ",
                            kMaxChannelPairs, " are allowed (fewer filters)"));
  }
  return absl::OkStatus();
}

// Checks the loss weights, the optimizer and training settings, and the layers' options.
absl::Status CheckTrainingSettings(const ModelConfig& c) {
  const bool v = c.variable_angle();
  if (static_cast<int64_t>(c.loss_weights.size()) != c.num_losses()) {
    return Bad(v ? "loss_weights needs 4 entries" : "loss_weights needs 3 entries");
  }
  if (!(c.learning_rate > 0)) return Bad("learning_rate must be > 0");
  if (!(c.rms_rho > 0 && c.rms_rho < 1)) return Bad("rms_rho must be in (0, 1)");
  if (!(c.rms_eps > 0)) return Bad("rms_eps must be > 0");
  if (!(c.label_flip >= 0 && c.label_flip < 0.5)) return Bad("label_flip must be in [0, 0.5)");
  if (c.generator_steps < 1 || c.generator_steps > 100) {
    return Bad("generator_steps must be in [1, 100]");
  }
  if (c.default_batch < 1 || c.default_batch > kMaxBatch) {
    return Bad(absl::StrCat("default_batch must be in [1, ", kMaxBatch, "]"));
  }
  if (!(c.dropout >= 0 && c.dropout < 1)) return Bad("dropout must be in [0, 1)");
  if (!(c.discriminator_log_scale >= 0 && c.discriminator_log_scale <= 1e6)) {
    return Bad("discriminator_log_scale must be in [0, 1e6] (0 disables the log input)");
  }
  if (!(c.generator_relu_grad_slope >= 0 && c.generator_relu_grad_slope <= 1)) {
    return Bad("generator_relu_grad_slope must be in [0, 1] (0 is the exact ReLU gradient)");
  }
  return absl::OkStatus();
}

// Checks the shower template's modes and the profile loss with its fit.
absl::Status CheckTemplateAndProfile(const ModelConfig& c) {
  const bool v = c.variable_angle();
  if (c.template_modes < 0 || c.template_modes > kMaxTemplateModes) {
    return Bad(absl::StrCat("template_modes must be in [0, ", kMaxTemplateModes, "]"));
  }
  if (c.template_modes > 0 && !c.generator_template) {
    return Bad("template_modes needs generator_template=1 (the modes are part of the template)");
  }
  if (c.template_modes > (v ? c.latent - 2 : c.latent)) {
    return Bad(
        "template_modes must not exceed the generator's noise width (latent, or latent - 2 "
        "for 3dgan-51)");
  }
  if (!(c.profile_loss_weight >= 0 && c.profile_loss_weight <= 1e3)) {
    return Bad("profile_loss_weight must be in [0, 1000] (0 disables the profile loss)");
  }
  if (!c.profile_fit.empty()) {
    if (static_cast<int64_t>(c.profile_fit.size()) != 2 * c.profile_slices()) {
      return Bad(
          absl::StrCat("profile_fit needs 2 x (x + y + z) = ", 2 * c.profile_slices(),
                       " values (a then b per slice); leave it empty to fit it to the data"));
    }
    for (double v : c.profile_fit) {
      if (!std::isfinite(v)) return Bad("profile_fit values must be finite");
    }
  }
  if (!(c.generator_energy_loss_weight == -1 ||
        (c.generator_energy_loss_weight >= 0 && c.generator_energy_loss_weight <= 1000))) {
    return Bad("generator_energy_loss_weight must be in [0, 1000], or -1 for loss_weights[1]");
  }
  if (c.ecal_loss_batch_mean && c.ecal_loss_quantiles) {
    return Bad(
        "ecal_loss_batch_mean and ecal_loss_quantiles are two forms of one loss: set one of them");
  }
  if (c.discriminator_feature_units < 0 || c.discriminator_feature_units > kMaxFeatureUnits) {
    return Bad(absl::StrCat("discriminator_feature_units must be in [0, ", kMaxFeatureUnits,
                            "] (0: no feature head)"));
  }
  if (!(c.template_learning_rate_scale >= 0 && c.template_learning_rate_scale <= 10)) {
    return Bad("template_learning_rate_scale must be in [0, 10] (0: the template stays as fitted)");
  }
  if (!(c.discriminator_learning_rate_scale > 0 && c.discriminator_learning_rate_scale <= 100)) {
    return Bad("discriminator_learning_rate_scale must be in (0, 100] (1: the generator's rate)");
  }
  if (!(c.template_residual_init >= 0 && c.template_residual_init <= 1)) {
    return Bad("template_residual_init must be in [0, 1] (0: the network's output starts at 0)");
  }
  if (c.template_residual_init != kDefaultTemplateResidualInit && !c.generator_template) {
    return Bad("template_residual_init needs generator_template=1");
  }
  if (c.template_learning_rate_scale != 1 && !c.generator_template) {
    return Bad("template_learning_rate_scale needs generator_template=1");
  }
  if (!(c.template_residual_learning_rate_scale >= 0 &&
        c.template_residual_learning_rate_scale <= 10)) {
    return Bad(
        "template_residual_learning_rate_scale must be in [0, 10] (0: the last conv stays as "
        "initialised)");
  }
  if (c.template_residual_learning_rate_scale != 1 && !c.generator_template) {
    return Bad("template_residual_learning_rate_scale needs generator_template=1");
  }
  if (!c.template_residual_noise && !c.generator_template) {
    return Bad(
        "template_residual_noise=0 needs generator_template=1 (its modes and spots give "
        "each shower's variety)");
  }
  if (c.template_relative_residual && !c.generator_template) {
    return Bad("template_relative_residual needs generator_template=1 (it scales the template)");
  }
  if (c.generator_spots && (!c.generator_template || c.cell_power != 1.0)) {
    return Bad(
        "generator_spots needs generator_template=1 and cell_power 1 (the spots are drawn in "
        "energy units around the template's showers)");
  }
  if (!(c.generator_spot_gev >= 0 && c.generator_spot_gev <= 1)) {
    return Bad("generator_spot_gev must be in [0, 1] GeV (0: fitted by a fresh training)");
  }
  if (!(c.generator_spot_shape >= 0 && c.generator_spot_shape <= 100)) {
    return Bad(
        "generator_spot_shape must be in [0, 100] (0: every spot deposits exactly one spot "
        "energy)");
  }
  if (!c.generator_spots && c.generator_spot_shape != 0) {
    return Bad("generator_spot_shape needs generator_spots=1");
  }
  if (!c.generator_spots && c.generator_spot_gev != 0) {
    return Bad("generator_spot_gev needs generator_spots=1");
  }
  if (c.generator_spots && c.generator_spot_gev == 0 && !c.fit_conditions_to_data) {
    return Bad(
        "generator_spots needs generator_spot_gev: set fit_conditions_to_data=1 to fit it to "
        "the training data");
  }
  if (c.profile_loss_weight > 0 && c.profile_fit.empty() && !c.fit_conditions_to_data) {
    return Bad(
        "profile_loss_weight needs profile_fit: set fit_conditions_to_data=1 to fit it to the "
        "training data");
  }
  return absl::OkStatus();
}

// Checks the cell and energy scaling, the fake conditions' ranges and the ecal fit.
absl::Status CheckScalesAndConditions(const ModelConfig& c) {
  if (!(c.cell_scale > 0) || !(c.cell_power > 0) || !(c.energy_scale > 0)) {
    return Bad("cell_scale, cell_power and energy_scale must be > 0");
  }
  if (!(c.fake_energy_min_gev > 0 && c.fake_energy_min_gev <= c.fake_energy_max_gev)) {
    return Bad("fake energy range must satisfy 0 < min <= max");
  }
  if (!(c.fake_theta_min_rad > 0 && c.fake_theta_min_rad <= c.fake_theta_max_rad &&
        c.fake_theta_max_rad < 3.14159265358979)) {
    return Bad("fake theta range must lie inside (0, pi)");
  }
  if (c.ecal_fit.empty() || c.ecal_fit.size() > 16)
    return Bad("ecal_fit needs 1 to 16 coefficients");
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateModelConfig(const ModelConfig& c) {
  // In this order: the first problem found is the one reported.
  for (absl::Status (*check)(const ModelConfig&) :
       {CheckLayerSizes, CheckChannelPairs, CheckTrainingSettings, CheckTemplateAndProfile,
        CheckScalesAndConditions}) {
    if (absl::Status st = check(c); !st.ok()) return st;
  }
  return absl::OkStatus();
}

std::string SerializeModelConfig(const ModelConfig& c) {
  std::string out;
  auto put = [&out](absl::string_view key, const std::string& value) {
    absl::StrAppend(&out, key, "=", value, "\n");
  };
  auto num = [](double d) { return absl::StrFormat("%.17g", d); };
  put("preset", c.preset);
  put("architecture", c.variable_angle() ? "variable_angle_51" : "fixed_angle_25");
  put("grid", Join(std::vector<int64_t>(c.grid.begin(), c.grid.end())));
  put("latent", absl::StrCat(c.latent));
  put("dense_channels", absl::StrCat(c.dense_channels));
  put("generator_filters", Join(c.generator_filters));
  put("generator_bn_eps", num(c.generator_bn_eps));
  put("discriminator_filters", Join(c.discriminator_filters));
  put("discriminator_bn_eps", num(c.discriminator_bn_eps));
  put("dropout", num(c.dropout));
  put("discriminator_log_scale", num(c.discriminator_log_scale));
  put("discriminator_feature_units", absl::StrCat(c.discriminator_feature_units));
  put("generator_relu_grad_slope", num(c.generator_relu_grad_slope));
  put("generator_template", c.generator_template ? "1" : "0");
  put("template_modes", absl::StrCat(c.template_modes));
  put("template_relative_residual", c.template_relative_residual ? "1" : "0");
  put("template_residual_noise", c.template_residual_noise ? "1" : "0");
  put("template_learning_rate_scale", num(c.template_learning_rate_scale));
  put("template_residual_learning_rate_scale", num(c.template_residual_learning_rate_scale));
  put("discriminator_learning_rate_scale", num(c.discriminator_learning_rate_scale));
  put("template_residual_init", num(c.template_residual_init));
  put("profile_loss_weight", num(c.profile_loss_weight));
  put("ecal_loss_batch_mean", c.ecal_loss_batch_mean ? "1" : "0");
  put("ecal_loss_quantiles", c.ecal_loss_quantiles ? "1" : "0");
  put("generator_energy_loss_weight", num(c.generator_energy_loss_weight));
  put("generator_spots", c.generator_spots ? "1" : "0");
  put("generator_spot_gev", num(c.generator_spot_gev));
  put("generator_spot_shape", num(c.generator_spot_shape));
  put("profile_fit", Join(c.profile_fit));
  put("bn_momentum", num(c.bn_momentum));
  put("leaky_slope", num(c.leaky_slope));
  put("loss_weights", Join(c.loss_weights));
  put("learning_rate", num(c.learning_rate));
  put("rms_rho", num(c.rms_rho));
  put("rms_eps", num(c.rms_eps));
  put("label_flip", num(c.label_flip));
  put("generator_steps", absl::StrCat(c.generator_steps));
  put("default_batch", absl::StrCat(c.default_batch));
  put("cell_scale", num(c.cell_scale));
  put("cell_power", num(c.cell_power));
  put("energy_scale", num(c.energy_scale));
  put("cell_threshold", num(c.cell_threshold));
  put("min_event_sum_gev", num(c.min_event_sum_gev));
  put("fake_energy_min_gev", num(c.fake_energy_min_gev));
  put("fake_energy_max_gev", num(c.fake_energy_max_gev));
  put("fake_theta_min_rad", num(c.fake_theta_min_rad));
  put("fake_theta_max_rad", num(c.fake_theta_max_rad));
  put("ecal_fit", Join(c.ecal_fit));
  put("ecal_fit_scale", num(c.ecal_fit_scale));
  put("collapse_ecal_loss", num(c.collapse_ecal_loss));
  put("fit_conditions_to_data", c.fit_conditions_to_data ? "1" : "0");
  return out;
}

namespace {

// The `key=value` lines of a serialized config, read field by field. The first problem is kept
// (a missing key, a bad number) and later reads leave their outputs as they are.
class ConfigReader {
 public:
  explicit ConfigReader(absl::string_view text) {
    for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
      std::pair<std::string, std::string> p = absl::StrSplit(line, absl::MaxSplits('=', 1));
      kv_[p.first] = p.second;
    }
  }
  const absl::Status& status() const { return status_; }
  bool Has(absl::string_view key) const { return kv_.find(key) != kv_.end(); }
  void Fail(std::string message) {
    if (status_.ok()) status_ = absl::InvalidArgumentError(std::move(message));
  }

  const std::string* Get(absl::string_view key) {
    auto it = kv_.find(key);
    if (it == kv_.end()) {
      Fail(absl::StrCat("model config: missing ", key));
      return nullptr;
    }
    return &it->second;
  }
  void Double(absl::string_view key, double* out) {
    const std::string* s = Get(key);
    if (s != nullptr && !absl::SimpleAtod(*s, out)) {
      Fail(absl::StrCat("model config: bad number for ", key));
    }
  }
  void Int(absl::string_view key, int64_t* out) {
    const std::string* s = Get(key);
    if (s != nullptr && !absl::SimpleAtoi(*s, out)) {
      Fail(absl::StrCat("model config: bad integer for ", key));
    }
  }
  void Ints(absl::string_view key, std::vector<int64_t>* out) { List(key, out); }
  void Doubles(absl::string_view key, std::vector<double>* out) { List(key, out); }
  // Optional keys: configs written before a key existed parse with the value it stands for.
  void OptionalFlag(absl::string_view key, bool* out, bool absent) {
    auto it = kv_.find(key);
    *out = absent;
    if (it == kv_.end()) return;
    if (it->second != "0" && it->second != "1") {
      Fail(absl::StrCat("model config: ", key, " must be 0 or 1"));
    }
    *out = it->second == "1";
  }
  void OptionalDouble(absl::string_view key, double* out) {
    if (Has(key)) Double(key, out);
  }

 private:
  template <typename T>
  void List(absl::string_view key, std::vector<T>* out) {
    const std::string* s = Get(key);
    if (s == nullptr) return;
    out->clear();
    for (absl::string_view part : absl::StrSplit(*s, ',', absl::SkipEmpty())) {
      T v;
      bool ok;
      if constexpr (std::is_same_v<T, double>) {
        ok = absl::SimpleAtod(part, &v);
      } else {
        ok = absl::SimpleAtoi(part, &v);
      }
      if (!ok) {
        Fail(absl::StrCat("model config: bad ", key));
        return;
      }
      out->push_back(v);
    }
  }

  std::map<std::string, std::string, std::less<>> kv_;
  absl::Status status_;
};

}  // namespace

absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view text) {
  if (text.size() > kMaxConfigTextBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("model config: ", text.size(), " bytes; at most ", kMaxConfigTextBytes));
  }
  ConfigReader r(text);
  ModelConfig c;
  if (const std::string* s = r.Get("preset")) c.preset = *s;
  if (const std::string* s = r.Get("architecture")) {
    if (*s == "fixed_angle_25") {
      c.architecture = Architecture::kFixedAngle25;
    } else if (*s == "variable_angle_51") {
      c.architecture = Architecture::kVariableAngle51;
    } else {
      r.Fail("model config: unknown architecture " + *s);
    }
  }
  std::vector<int64_t> grid;
  r.Ints("grid", &grid);
  if (grid.size() == 3) {
    c.grid = {grid[0], grid[1], grid[2]};
  } else {
    r.Fail("model config: grid needs 3 entries");
  }
  r.Int("latent", &c.latent);
  r.Int("dense_channels", &c.dense_channels);
  r.Ints("generator_filters", &c.generator_filters);
  r.Double("generator_bn_eps", &c.generator_bn_eps);
  r.Ints("discriminator_filters", &c.discriminator_filters);
  r.Double("discriminator_bn_eps", &c.discriminator_bn_eps);
  r.Double("dropout", &c.dropout);
  r.Double("bn_momentum", &c.bn_momentum);
  r.Double("leaky_slope", &c.leaky_slope);
  r.Doubles("loss_weights", &c.loss_weights);
  r.Double("learning_rate", &c.learning_rate);
  r.Double("rms_rho", &c.rms_rho);
  r.Double("rms_eps", &c.rms_eps);
  r.Double("label_flip", &c.label_flip);
  r.Int("generator_steps", &c.generator_steps);
  r.Int("default_batch", &c.default_batch);
  r.Double("cell_scale", &c.cell_scale);
  r.Double("cell_power", &c.cell_power);
  r.Double("energy_scale", &c.energy_scale);
  r.Double("cell_threshold", &c.cell_threshold);
  r.Double("min_event_sum_gev", &c.min_event_sum_gev);
  r.Double("fake_energy_min_gev", &c.fake_energy_min_gev);
  r.Double("fake_energy_max_gev", &c.fake_energy_max_gev);
  r.Double("fake_theta_min_rad", &c.fake_theta_min_rad);
  r.Double("fake_theta_max_rad", &c.fake_theta_max_rad);
  r.Doubles("ecal_fit", &c.ecal_fit);
  r.Double("ecal_fit_scale", &c.ecal_fit_scale);
  r.Double("collapse_ecal_loss", &c.collapse_ecal_loss);
  // Without the key: conditions fitted already (the config carries them), a linear
  // discriminator input, the exact ReLU gradient, no template, no modes, no profile loss.
  r.OptionalFlag("fit_conditions_to_data", &c.fit_conditions_to_data, false);
  r.OptionalDouble("discriminator_log_scale", &c.discriminator_log_scale);
  r.OptionalDouble("generator_relu_grad_slope", &c.generator_relu_grad_slope);
  if (r.Has("discriminator_feature_units")) {
    r.Int("discriminator_feature_units", &c.discriminator_feature_units);
  }
  r.OptionalFlag("generator_template", &c.generator_template, false);
  if (r.Has("template_modes")) r.Int("template_modes", &c.template_modes);
  r.OptionalFlag("template_relative_residual", &c.template_relative_residual, false);
  r.OptionalFlag("template_residual_noise", &c.template_residual_noise, true);
  r.OptionalDouble("template_learning_rate_scale", &c.template_learning_rate_scale);
  r.OptionalDouble("template_residual_learning_rate_scale",
                   &c.template_residual_learning_rate_scale);
  r.OptionalDouble("discriminator_learning_rate_scale", &c.discriminator_learning_rate_scale);
  r.OptionalDouble("template_residual_init", &c.template_residual_init);
  r.OptionalDouble("profile_loss_weight", &c.profile_loss_weight);
  r.OptionalFlag("ecal_loss_batch_mean", &c.ecal_loss_batch_mean, false);
  r.OptionalFlag("ecal_loss_quantiles", &c.ecal_loss_quantiles, false);
  r.OptionalDouble("generator_energy_loss_weight", &c.generator_energy_loss_weight);
  r.OptionalFlag("generator_spots", &c.generator_spots, false);
  r.OptionalDouble("generator_spot_gev", &c.generator_spot_gev);
  r.OptionalDouble("generator_spot_shape", &c.generator_spot_shape);
  if (r.Has("profile_fit")) r.Doubles("profile_fit", &c.profile_fit);
  if (!r.status().ok()) return r.status();
  if (absl::Status s = ValidateModelConfig(c); !s.ok()) return s;
  return c;
}

absl::StatusOr<ModelConfig> OverrideModelConfig(const ModelConfig& config,
                                                absl::string_view assignments) {
  if (assignments.size() > kMaxConfigTextBytes) {
    return absl::InvalidArgumentError("model config overrides: too long");
  }
  std::vector<std::pair<std::string, std::string>> lines;
  for (absl::string_view line :
       absl::StrSplit(SerializeModelConfig(config), '\n', absl::SkipEmpty())) {
    lines.emplace_back(absl::StrSplit(line, absl::MaxSplits('=', 1)));
  }
  for (absl::string_view item : absl::StrSplit(assignments, ';', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    kv.first = std::string(absl::StripAsciiWhitespace(kv.first));
    kv.second = std::string(absl::StripAsciiWhitespace(kv.second));
    auto it = std::find_if(lines.begin(), lines.end(),
                           [&](const auto& line) { return line.first == kv.first; });
    if (it == lines.end() || kv.first == "preset" || kv.first == "architecture" ||
        kv.first == "grid") {
      return absl::InvalidArgumentError(absl::StrCat(
          "model config overrides: \"", kv.first,
          "\" is not a field that can be overridden (see SerializeModelConfig for the keys)"));
    }
    it->second = kv.second;
  }
  std::string text;
  for (const auto& [key, value] : lines) absl::StrAppend(&text, key, "=", value, "\n");
  return ParseModelConfig(text);
}

}  // namespace gantry::gan
