#include "jobspec/model_card.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "base/json_string.h"
#include "jobspec/export_profile.h"

namespace gantry::jobspec {
namespace {

namespace v1 = ::gantry::v1;

// JSON text with keys in the order they are written. Begin/End pair up; Key precedes every member
// of an object.
class JsonWriter {
 public:
  void BeginObject() { Open('{'); }
  void EndObject() { Close('}'); }
  void BeginArray() { Open('['); }
  void EndArray() { Close(']'); }
  void Key(const std::string& key) {
    Separate();
    AppendJsonString(&out_, key);
    out_ += ':';
    after_key_ = true;
  }
  void String(const std::string& value) {
    Separate();
    AppendJsonString(&out_, value);
  }
  void Int(int64_t value) {
    Separate();
    absl::StrAppend(&out_, value);
  }
  // The shortest text that reads back as the same double.
  void Number(double value) {
    if (!std::isfinite(value)) return Null();  // JSON has no NaN or infinity
    Separate();
    char buffer[32];
    const auto [end, error] = std::to_chars(buffer, buffer + sizeof(buffer), value);
    out_.append(buffer, error == std::errc() ? end : buffer);
  }
  void Null() {
    Separate();
    out_ += "null";
  }
  void Field(const std::string& key, const std::string& value) {
    Key(key);
    String(value);
  }
  std::string Take() { return std::move(out_); }

 private:
  void Open(char c) {
    Separate();
    out_ += c;
    first_ = true;
  }
  void Close(char c) {
    out_ += c;
    first_ = false;
  }
  void Separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_) out_ += ',';
    first_ = false;
  }

  std::string out_;
  bool first_ = true;
  bool after_key_ = false;
};

struct ParticleFacts {
  const char* name;
  int pdg;  // absolute PDG code
};

ParticleFacts FactsOf(v1::Particle particle) {
  switch (particle) {
    case v1::PARTICLE_ELECTRON:
      return {"e-", 11};
    case v1::PARTICLE_PHOTON:
      return {"gamma", 22};
    case v1::PARTICLE_PI0:
      return {"pi0", 111};
    case v1::PARTICLE_CHARGED_PION:
      return {"pi+-", 211};
    default:
      return {"unspecified", 0};
  }
}

void Tensors(JsonWriter& json, const google::protobuf::RepeatedPtrField<v1::ExportTensor>& list) {
  json.BeginArray();
  for (const v1::ExportTensor& t : list) {
    json.BeginObject();
    json.Field("name", t.name());
    json.Key("shape");
    json.BeginArray();
    for (int64_t d : t.shape()) json.Int(d);
    json.EndArray();
    json.Field("element_type", t.element_type());
    json.Field("description", t.description());
    json.EndObject();
  }
  json.EndArray();
}

// "a-b" (GeV, as the rank records a band in the lineage) as a range; nullopt when it is not one.
std::optional<v1::Range> BandOf(const v1::Lineage& lineage, const std::string& key) {
  auto it = lineage.hyper_parameters().find(key);
  if (it == lineage.hyper_parameters().end()) return std::nullopt;
  std::pair<std::string, std::string> parts = absl::StrSplit(it->second, absl::MaxSplits('-', 1));
  double lo = 0, hi = 0;
  if (!absl::SimpleAtod(parts.first, &lo) || !absl::SimpleAtod(parts.second, &hi) || !(lo < hi)) {
    return std::nullopt;
  }
  v1::Range range;
  range.set_min(lo);
  range.set_max(hi);
  return range;
}

void Range(JsonWriter& json, const v1::Range& range) {
  json.BeginObject();
  json.Key("min");
  json.Number(range.min());
  json.Key("max");
  json.Number(range.max());
  json.EndObject();
}

constexpr char kLeftOutPrefix[] = "left_out_";

// The recorded hyper-parameter `key` as a number, else null.
void NumberOf(JsonWriter& json, const v1::Lineage& lineage, const std::string& key) {
  auto it = lineage.hyper_parameters().find(key);
  double value = 0;
  if (it != lineage.hyper_parameters().end() && absl::SimpleAtod(it->second, &value)) {
    json.Number(value);
  } else {
    json.Null();
  }
}

// How the job drew its validation sample and its generated showers, so that the metrics of record
// can be redone from the dataset and an exported file; null when the job recorded no recipe.
void ValidationSample(JsonWriter& json, const v1::ModelVersion& model) {
  const v1::Lineage& lineage = model.lineage();
  const auto& hp = lineage.hyper_parameters();
  if (!hp.contains("validation_latent_seed") || !hp.contains("validation_split_seed")) {
    json.Null();
    return;
  }
  const bool folds = hp.contains("validation_folds");
  json.BeginObject();
  json.Field("split", folds ? "folds" : "holdout");
  json.Key("holdout_fraction");
  NumberOf(json, lineage, "validation_holdout_fraction");
  json.Key("folds");
  NumberOf(json, lineage, "validation_folds");
  json.Key("fold");
  NumberOf(json, lineage, "validation_fold");
  json.Key("split_seed");
  NumberOf(json, lineage, "validation_split_seed");
  json.Key("latent_seed");
  NumberOf(json, lineage, "validation_latent_seed");
  json.Field("how",
             folds ? "the dataset's events permuted by split_seed (Fisher-Yates, mt19937_64) and "
                     "cut into folds; fold `fold` is the sample"
                   : "round(holdout_fraction x events) events chosen by a Fisher-Yates permutation "
                     "driven by mt19937_64(split_seed), in permutation order");
  json.Field("generated",
             "at each held-out event's conditions in that order, one shower each (at most 4 x "
             "showers_per_bin; with validation energies, showers_per_bin per bin cycling its "
             "events); latents from one LibTorch CPU generator seeded with latent_seed, randn "
             "[n, latent] per batch of n = 64 (the last one smaller)");
  json.EndObject();
}

// A scored band: its energies and the metrics recorded under `prefix` (the prefix taken off; the
// control band's metrics left out of the left-out band's).
void BandMetrics(JsonWriter& json, const v1::Range& band, const std::map<std::string, double>& all,
                 const std::string& prefix) {
  json.Key("energy_gev");
  Range(json, band);
  json.Key("metrics");
  json.BeginObject();
  for (const auto& [name, value] : all) {
    if (!absl::StartsWith(name, prefix)) continue;
    const std::string rest = name.substr(prefix.size());
    if (absl::StartsWith(rest, "control_")) continue;
    json.Key(rest);
    json.Number(value);
  }
  json.EndObject();
}

// One condition input of the interface: how a consumer feeds it.
void Condition(JsonWriter& json, const char* input, const char* quantity, const char* unit,
               const char* encoding) {
  json.BeginObject();
  json.Field("input", input);
  json.Field("quantity", quantity);
  json.Field("unit", unit);
  json.Field("encoding", encoding);
  json.EndObject();
}

template <typename Map>
void SortedStrings(JsonWriter& json, const Map& map) {
  const std::map<std::string, std::string> sorted(map.begin(), map.end());
  json.BeginObject();
  for (const auto& [k, v] : sorted) json.Field(k, v);
  json.EndObject();
}

// The card of `model` with the interface `exported` describes; `file_name` null: no file
// ("file": null).
absl::StatusOr<std::string> CardJson(const v1::ModelVersion& model,
                                     const v1::ExportMetadata& exported,
                                     const std::string* file_name) {
  const std::string ref = absl::StrCat(model.name(), ":", model.version());
  if (exported.model_ref() != ref) {
    return absl::InvalidArgumentError(absl::StrCat("the export is of ", exported.model_ref(),
                                                   ", the registry entry of ", ref));
  }
  if (exported.checkpoint_sha256() != model.checkpoint_sha256()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the export was made from checkpoint ", exported.checkpoint_sha256(), ", ",
                     ref, " is checkpoint ", model.checkpoint_sha256()));
  }
  const v1::ExportProfile profile = EffectiveProfile(exported.profile());
  const v1::ExportTensor* shower = FindExportTensor(exported.outputs(), "shower");
  std::vector<int64_t> grid(exported.grid().begin(), exported.grid().end());
  if (grid.empty() && shower != nullptr && shower->shape_size() == 4) {
    grid = {shower->shape(1), shower->shape(2), shower->shape(3)};  // a worker before profiles
  }
  const int64_t latent_size = ExportLatentWidth(exported);
  if (latent_size < 1 || shower == nullptr || grid.size() != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the export does not have the ", ExportProfileName(profile),
        " profile's interface (a latent input, a shower output and a grid of three sizes)"));
  }
  // The model's angle input: its own in the gantry profile, a slot of the packed input in par04.
  const bool variable_angle =
      exported.variable_angle() || FindExportTensor(exported.inputs(), "theta") != nullptr;

  JsonWriter json;
  json.BeginObject();
  json.Field("schema", kModelCardSchema);

  json.Key("model");
  json.BeginObject();
  json.Field("ref", ref);
  json.Field("name", model.name());
  json.Key("version");
  json.Int(model.version());
  json.Field("owner", model.owner());
  json.Field("description", model.description());
  json.Field("created_at",
             absl::FormatTime("%Y-%m-%dT%H:%M:%SZ",
                              absl::FromUnixSeconds(model.created_at().seconds()),
                              absl::UTCTimeZone()));
  json.Key("aliases");
  json.BeginArray();
  for (const std::string& alias : model.aliases()) json.String(alias);
  json.EndArray();
  json.Key("tags");
  SortedStrings(json, model.tags());
  json.EndObject();

  json.Key("file");
  if (file_name == nullptr) {
    json.Null();
  } else {
    json.BeginObject();
    json.Field("name", *file_name);
    json.Field("format", ExportFormatName(exported.format()));
    json.Key("size_bytes");
    json.Int(exported.size_bytes());
    json.Field("sha256", exported.sha256());
    json.EndObject();
  }

  json.Key("interface");
  json.BeginObject();
  json.Key("inputs");
  Tensors(json, exported.inputs());
  json.Key("outputs");
  Tensors(json, exported.outputs());
  json.Field("batch", "dimension 0 (-1 in a shape) is free: any number of showers per call");
  json.Key("latent");
  json.BeginObject();
  json.Field("input", profile == v1::EXPORT_PROFILE_PAR04
                          ? absl::StrCat("input, columns 0..", latent_size - 1)
                          : std::string("latent"));
  json.Key("size");
  json.Int(latent_size);
  json.Field("prior", profile == v1::EXPORT_PROFILE_DDML
                          ? "uniform in [-1, 1], independent components (the file maps them to the "
                            "standard normal the generator was trained with, sqrt(2) erfinv(u))"
                          : "standard normal: independent N(0, 1) components");
  json.Field("note",
             "the file has no random operator: draw the latent yourself, one row per shower");
  json.EndObject();
  json.Key("conditions");
  json.BeginArray();
  if (profile == v1::EXPORT_PROFILE_PAR04) {
    const std::string e_col = absl::StrCat("input, column ", latent_size);
    const std::string t_col = absl::StrCat("input, column ", latent_size + 1);
    const std::string g_col =
        absl::StrCat("input, columns ", latent_size + 2, " and ", latent_size + 3);
    Condition(json, e_col.c_str(), "energy of the primary particle", "MeV",
              "E / 1024000 (Par04's fMaxEnergy)");
    Condition(json, t_col.c_str(), "incidence angle of the primary", "rad",
              variable_angle ? "theta / (pi/2) (Par04's fMaxAngle, 90 degrees); 1 is normal "
                               "incidence"
                             : "theta / (pi/2); read and ignored: the model is fixed-angle (normal "
                               "incidence)");
    Condition(json, g_col.c_str(), "Par04's geometry one-hot", "none (flags)",
              "read and ignored: the model knows one detector (below)");
  } else {
    Condition(json, "energy", "energy of the primary particle", "GeV",
              profile == v1::EXPORT_PROFILE_DDML
                  ? "the value itself, one per shower ([N, 1, 1, 1, 1] or [N, 1])"
                  : "the value itself, one per shower ([N, 1]); the file scales it");
    if (variable_angle) {
      Condition(json, "theta", "incidence angle of the primary in the x-z plane", "rad",
                "the value itself, one per shower ([N, 1]); pi/2 is normal incidence, and the "
                "shower axis moves cot(theta) cells along x per layer");
    }
  }
  json.EndArray();
  json.EndObject();

  json.Key("shower");
  json.BeginObject();
  json.Field("output", "shower");
  json.Key("grid");
  json.BeginArray();
  for (int64_t n : grid) json.Int(n);
  json.EndArray();
  json.Field("axes", "x, y transverse; z the layer, front to back");
  switch (profile) {
    case v1::EXPORT_PROFILE_PAR04:
      json.Field("cell_order", "flat [N, x * y * z]: z varies fastest, then y, then x");
      json.Field("unit",
                 "fraction of the primary's energy deposited in each cell's active (silicon) "
                 "layer: multiply by the primary's energy (Par04 multiplies by it in MeV)");
      break;
    case v1::EXPORT_PROFILE_DDML:
      json.Field("cell_order", "[N, z, x, y]: y varies fastest, then x, then the layer z "
                               "(DDML's RegularGridGANModel::convertOutput reads it so)");
      json.Field("unit", "MeV deposited in each cell's active (silicon) layer");
      break;
    default:
      json.Field("cell_order", "row-major [N, x, y, z]: z varies fastest, then y, then x");
      json.Field("unit", "GeV deposited in each cell's active (silicon) layer");
  }
  json.Field("note",
             "the sum over a shower's cells is the sampling fraction (about 2%) of the primary's "
             "energy, not the primary's energy");
  json.EndObject();

  json.Key("profile");
  json.BeginObject();
  json.Field("name", ExportProfileName(profile));
  switch (profile) {
    case v1::EXPORT_PROFILE_PAR04:
      json.Field("consumer",
                 "Geant4 extended example Par04 (Par04InferenceSetup with ONNX Runtime or "
                 "LibTorch), or a hook that packs its input the same way");
      json.Field("adapt",
                 "Par04 places the flat output on its cylindrical (rho, phi, z) mesh; this grid "
                 "is Cartesian: place cell (x, y, z) at ((x - nx/2 + 0.5) * 5.1 mm, (y - ny/2 + "
                 "0.5) * 5.1 mm) in layer z, not at Par04's (rho, phi)");
      break;
    case v1::EXPORT_PROFILE_DDML:
      json.Field("consumer",
                 "Key4hep DDML RegularGridGAN*TorchModel (RegularGridGANModel with "
                 "TorchInference)");
      json.Field("adapt",
                 "set the plugin's NCellsX/Y/Z, LatentVectorSize and CellSizeX/Y to the values "
                 "of this card (gantry models export prints them)");
      break;
    default:
      json.Field("consumer", "gantry's own interface: any ONNX Runtime, LibTorch or PyTorch "
                             "caller");
      json.Field("adapt", "nothing beyond the interface above");
  }
  json.EndObject();

  json.Key("detector");
  json.BeginObject();
  json.Field("description",
             "CLIC-like W/Si electromagnetic calorimeter of the 3DGAN data and gantry's toy Monte "
             "Carlo (docs/MODELS.md \"Toy Monte Carlo\")");
  json.Key("cell_size_mm");
  json.BeginObject();
  json.Key("x");
  json.Number(5.1);
  json.Key("y");
  json.Number(5.1);
  json.EndObject();
  json.Key("layers");
  json.Int(25);
  json.Field("absorber", "17 layers of 2.4 mm W, then 8 of 4.8 mm W");
  json.Field("active", "0.5 mm Si per layer");
  json.EndObject();

  json.Key("validity");
  json.BeginObject();
  const ParticleFacts particle = FactsOf(model.particle());
  json.Key("particle");
  json.BeginObject();
  json.Field("name", particle.name);
  json.Key("pdg_abs");
  json.Int(particle.pdg);
  json.EndObject();
  json.Key("energy_gev");
  Range(json, model.energy_range_gev());
  json.Key("theta_rad");
  if (variable_angle) {
    Range(json, model.theta_range_rad());
  } else {
    json.Null();
  }
  json.Key("left_out_energy_gev");
  const std::optional<v1::Range> left_out = BandOf(model.lineage(), "left_out_energy_gev");
  if (left_out.has_value()) {
    Range(json, *left_out);
  } else {
    json.Null();
  }
  json.Field("angle", variable_angle ? "as trained: within theta_rad"
                                     : "fixed: normal incidence only (no theta input)");
  json.Field("outside",
             "the ranges it was trained on; gantry refuses to generate outside them, the exported "
             "file does not check");
  json.EndObject();

  const v1::Lineage& lineage = model.lineage();
  json.Key("training");
  json.BeginObject();
  json.Field("preset", lineage.model_preset());
  json.Field("dataset", lineage.dataset());
  json.Field("dataset_sha256", lineage.dataset_sha256());
  json.Key("toy_mc");
  if (absl::StartsWith(lineage.dataset(), "toymc:")) {
    std::map<std::string, std::string> settings;
    for (absl::string_view item :
         absl::StrSplit(absl::string_view(lineage.dataset()).substr(6), ',', absl::SkipEmpty())) {
      std::pair<std::string, std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
      settings[kv.first] = kv.second;
    }
    SortedStrings(json, settings);
  } else {
    json.Null();
  }
  json.Field("job_id", lineage.job_id());
  json.Key("world_size");
  json.Int(lineage.world_size());
  json.Key("hyper_parameters");
  SortedStrings(json, lineage.hyper_parameters());
  json.Field("parent_model", lineage.parent_model());
  json.Field("study_id", lineage.study_id());
  json.Field("code_version", lineage.code_version());
  json.EndObject();

  json.Key("checkpoint");
  json.BeginObject();
  json.Field("sha256", model.checkpoint_sha256());
  json.Key("size_bytes");
  json.Int(model.checkpoint_size_bytes());
  json.EndObject();

  json.Key("validation");
  json.BeginObject();
  json.Key("metrics");
  json.BeginObject();
  const std::map<std::string, double> metrics(model.metrics().begin(), model.metrics().end());
  for (const auto& [name, value] : metrics) {
    if (absl::StartsWith(name, kLeftOutPrefix)) continue;  // in left_out below
    json.Key(name);
    json.Number(value);
  }
  json.EndObject();
  json.Field("note",
             "lower is better; measured by the training job on its validation sample "
             "(docs/MODELS.md \"Validation metrics\")");
  json.Key("sample");
  ValidationSample(json, model);
  json.Key("left_out");
  if (left_out.has_value()) {
    json.BeginObject();
    BandMetrics(json, *left_out, metrics, kLeftOutPrefix);
    json.Key("control");
    const std::string control_prefix = std::string(kLeftOutPrefix) + "control_";
    const std::optional<v1::Range> control =
        BandOf(model.lineage(), control_prefix + "energy_gev");
    if (control.has_value()) {
      json.BeginObject();
      BandMetrics(json, *control, metrics, control_prefix);
      json.EndObject();
    } else {
      json.Null();
    }
    json.Field("note",
               "training skipped left_out_energy_gev; both bands scored on held-out events alone, "
               "the control a trained band of the same width beside it (docs/MODELS.md "
               "\"Leave one energy out\")");
    json.EndObject();
  } else {
    json.Null();
  }
  json.EndObject();

  json.Key("bf16");
  json.BeginObject();
  json.Field("state", v1::Bf16Check::State_Name(model.bf16().state()));
  json.Field("reason", model.bf16().reason());
  json.EndObject();

  json.EndObject();
  return json.Take();
}

}  // namespace

absl::StatusOr<std::string> ModelCardJson(const v1::ModelVersion& model,
                                          const v1::ExportMetadata& exported,
                                          const std::string& file_name) {
  return CardJson(model, exported, &file_name);
}

absl::StatusOr<std::string> RegistryModelCardJson(const v1::ModelVersion& model) {
  const v1::GeneratorInterface& g = model.generator();
  if (g.grid_size() != 3 || g.latent_size() < 1) {
    return absl::FailedPreconditionError(
        absl::StrCat(model.name(), ":", model.version(),
                     " has no recorded generator interface (a baseline, or registered before "
                     "interfaces were recorded); export it for a card"));
  }
  v1::ExportMetadata m;
  m.set_profile(v1::EXPORT_PROFILE_GANTRY);
  m.set_model_ref(absl::StrCat(model.name(), ":", model.version()));
  m.set_checkpoint_sha256(model.checkpoint_sha256());
  *m.mutable_grid() = g.grid();
  m.set_variable_angle(g.variable_angle());
  const ProfileInterface interface = InterfaceOf(
      v1::EXPORT_PROFILE_GANTRY, {g.grid(0), g.grid(1), g.grid(2)}, g.latent_size(),
      g.variable_angle());
  m.mutable_inputs()->Add(interface.inputs.begin(), interface.inputs.end());
  m.mutable_outputs()->Add(interface.outputs.begin(), interface.outputs.end());
  return CardJson(model, m, nullptr);
}

}  // namespace gantry::jobspec
