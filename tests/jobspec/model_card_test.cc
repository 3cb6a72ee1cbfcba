// The model card (jobspec/model_card.h): every section filled from the registry entry and the
// export's metadata, valid JSON, exact numbers, the angle as the export has it, and refusals when
// the two do not describe one export of one model.
#include "jobspec/model_card.h"

#include <gtest/gtest.h>

#include <limits>
#include <set>
#include <string>
#include <vector>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "jobspec/export_profile.h"
#include "jobspec/model_config.h"

namespace gantry::jobspec {
namespace {

namespace v1 = ::gantry::v1;
using google::protobuf::Struct;
using google::protobuf::Value;

v1::ModelVersion Model() {
  v1::ModelVersion m;
  m.set_name("calo");
  m.set_version(3);
  m.set_owner("alice");
  m.set_description("tiny \"quoted\" model");
  m.mutable_created_at()->set_seconds(1796000000);
  m.add_aliases("prod");
  (*m.mutable_tags())["z"] = "last";
  (*m.mutable_tags())["a"] = "first";
  m.set_checkpoint_sha256(std::string(64, 'c'));
  m.set_checkpoint_size_bytes(12345);
  m.set_particle(v1::PARTICLE_ELECTRON);
  m.mutable_energy_range_gev()->set_min(20);
  m.mutable_energy_range_gev()->set_max(200);
  m.mutable_theta_range_rad()->set_min(1.0471975511965976);
  m.mutable_theta_range_rad()->set_max(2.0943951023931953);
  (*m.mutable_metrics())["mre_sampling_fraction"] = 0.1;
  (*m.mutable_metrics())["auc_features"] = 0.987654321;
  m.mutable_bf16()->set_state(v1::Bf16Check::STATE_AVAILABLE);
  v1::Lineage* l = m.mutable_lineage();
  l->set_job_id("job-1");
  l->set_dataset("toymc:layout=25,events=160,seed=5,emin=20,emax=200");
  l->set_dataset_sha256(std::string(64, 'd'));
  (*l->mutable_hyper_parameters())["seed"] = "11";
  l->set_world_size(2);
  l->set_code_version("0.1.0 abc");
  l->set_model_preset("tiny");
  return m;
}

v1::ExportTensor* AddTensor(google::protobuf::RepeatedPtrField<v1::ExportTensor>* list,
                            const std::string& name, std::initializer_list<int64_t> shape) {
  v1::ExportTensor* t = list->Add();
  t->set_name(name);
  for (int64_t d : shape) t->add_shape(d);
  t->set_element_type("float32");
  t->set_description(name + " tensor");
  return t;
}

v1::ExportMetadata Exported(bool theta) {
  v1::ExportMetadata e;
  e.set_format(v1::EXPORT_FORMAT_ONNX);
  e.set_size_bytes(185763);
  e.set_sha256(std::string(64, 'e'));
  e.set_model_ref("calo:3");
  e.set_checkpoint_sha256(std::string(64, 'c'));
  AddTensor(e.mutable_inputs(), "latent", {-1, 16});
  AddTensor(e.mutable_inputs(), "energy", {-1, 1});
  if (theta) AddTensor(e.mutable_inputs(), "theta", {-1, 1});
  AddTensor(e.mutable_outputs(), "shower", {-1, 25, 25, 25});
  for (int64_t n : {25, 25, 25}) e.add_grid(n);
  e.set_variable_angle(theta);
  e.set_profile(v1::EXPORT_PROFILE_GANTRY);
  return e;
}

// The metadata of a par04 export: one packed input, a flat output of fractions.
v1::ExportMetadata Par04(bool variable_angle) {
  v1::ExportMetadata e = Exported(false);
  e.set_profile(v1::EXPORT_PROFILE_PAR04);
  e.set_variable_angle(variable_angle);
  e.mutable_inputs()->Clear();
  e.mutable_outputs()->Clear();
  AddTensor(e.mutable_inputs(), "input", {-1, 16 + 4});
  AddTensor(e.mutable_outputs(), "shower", {-1, 25 * 25 * 25});
  return e;
}

Struct Parse(const std::string& json) {
  Struct s;
  const auto status = google::protobuf::util::JsonStringToMessage(json, &s);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  return s;
}

const Value& At(const Struct& s, std::initializer_list<const char*> path) {
  const Struct* at = &s;
  const Value* v = nullptr;
  for (const char* key : path) {
    EXPECT_TRUE(at->fields().count(key)) << "no " << key;
    v = &at->fields().at(key);
    if (v->has_struct_value()) at = &v->struct_value();
  }
  return *v;
}

TEST(ModelCardTest, EverySectionFromTheRegistryAndTheExport) {
  absl::StatusOr<std::string> card = ModelCardJson(Model(), Exported(false), "calo.onnx");
  ASSERT_TRUE(card.ok()) << card.status();
  const Struct s = Parse(*card);
  EXPECT_EQ(At(s, {"schema"}).string_value(), "gantry.model_card/1");
  EXPECT_EQ(At(s, {"model", "ref"}).string_value(), "calo:3");
  EXPECT_EQ(At(s, {"model", "description"}).string_value(), "tiny \"quoted\" model");
  EXPECT_EQ(At(s, {"model", "created_at"}).string_value(), "2026-11-30T00:53:20Z");
  EXPECT_EQ(At(s, {"file", "name"}).string_value(), "calo.onnx");
  EXPECT_EQ(At(s, {"file", "format"}).string_value(), "onnx");
  EXPECT_EQ(At(s, {"file", "sha256"}).string_value(), std::string(64, 'e'));
  EXPECT_EQ(At(s, {"file", "size_bytes"}).number_value(), 185763);
  EXPECT_EQ(At(s, {"interface", "latent", "size"}).number_value(), 16);
  EXPECT_EQ(At(s, {"interface", "inputs"}).list_value().values_size(), 2);
  EXPECT_EQ(At(s, {"interface", "conditions"}).list_value().values_size(), 1);  // energy only
  EXPECT_EQ(At(s, {"shower", "grid"}).list_value().values(2).number_value(), 25);
  EXPECT_EQ(At(s, {"detector", "cell_size_mm", "x"}).number_value(), 5.1);
  EXPECT_EQ(At(s, {"validity", "particle", "name"}).string_value(), "e-");
  EXPECT_EQ(At(s, {"validity", "particle", "pdg_abs"}).number_value(), 11);
  EXPECT_EQ(At(s, {"validity", "energy_gev", "min"}).number_value(), 20);
  EXPECT_EQ(At(s, {"validity", "energy_gev", "max"}).number_value(), 200);
  EXPECT_TRUE(At(s, {"validity", "theta_rad"}).has_null_value());  // fixed angle: no theta input
  EXPECT_EQ(At(s, {"training", "toy_mc", "emax"}).string_value(), "200");
  EXPECT_EQ(At(s, {"training", "hyper_parameters", "seed"}).string_value(), "11");
  EXPECT_EQ(At(s, {"training", "world_size"}).number_value(), 2);
  EXPECT_EQ(At(s, {"checkpoint", "sha256"}).string_value(), std::string(64, 'c'));
  EXPECT_EQ(At(s, {"validation", "metrics", "auc_features"}).number_value(), 0.987654321);
  EXPECT_EQ(At(s, {"bf16", "state"}).string_value(), "STATE_AVAILABLE");
  // Numbers are exact and keys sorted where they come from maps; the same inputs, the same bytes.
  EXPECT_NE(card->find("\"mre_sampling_fraction\":0.1}"), std::string::npos) << *card;
  EXPECT_LT(card->find("\"a\":\"first\""), card->find("\"z\":\"last\""));
  EXPECT_EQ(*card, *ModelCardJson(Model(), Exported(false), "calo.onnx"));
  EXPECT_TRUE(At(s, {"validity", "left_out_energy_gev"}).has_null_value());
  EXPECT_TRUE(At(s, {"validation", "left_out"}).has_null_value());
  EXPECT_TRUE(At(s, {"validation", "sample"}).has_null_value());  // no recipe recorded

  // The recipe the rank records: the split and the latent seed, as numbers.
  v1::ModelVersion m = Model();
  auto& hp = *m.mutable_lineage()->mutable_hyper_parameters();
  hp["validation_holdout_fraction"] = "0.25";
  hp["validation_split_seed"] = "11";
  hp["validation_latent_seed"] = "7930";
  const Struct r = Parse(*ModelCardJson(m, Exported(false), "calo.onnx"));
  EXPECT_EQ(At(r, {"validation", "sample", "split"}).string_value(), "holdout");
  EXPECT_EQ(At(r, {"validation", "sample", "holdout_fraction"}).number_value(), 0.25);
  EXPECT_EQ(At(r, {"validation", "sample", "split_seed"}).number_value(), 11);
  EXPECT_EQ(At(r, {"validation", "sample", "latent_seed"}).number_value(), 7930);
  EXPECT_TRUE(At(r, {"validation", "sample", "folds"}).has_null_value());
}

// Every leaf of `value` at `path` that is null or an empty string, except the allowed ones.
void CollectEmpty(const Value& value, const std::string& path, const std::set<std::string>& allowed,
                  std::vector<std::string>* empty) {
  if (allowed.count(path)) return;
  if (value.has_null_value() || (value.has_string_value() && value.string_value().empty())) {
    empty->push_back(path);
  } else if (value.has_struct_value()) {
    for (const auto& [key, member] : value.struct_value().fields()) {
      CollectEmpty(member, path.empty() ? key : path + "." + key, allowed, empty);
    }
  } else if (value.has_list_value()) {
    for (int i = 0; i < value.list_value().values_size(); ++i) {
      CollectEmpty(value.list_value().values(i), path + "[" + std::to_string(i) + "]", allowed,
                   empty);
    }
  }
}

// For every preset and every profile that can represent it: the card parses and every field is
// filled, but for the ones that are null by meaning (no angle, no left-out band, a hold-out
// rather than folds).
TEST(ModelCardTest, EveryFieldIsFilledForEveryPresetAndProfile) {
  for (const std::string& preset : gan::PresetNames()) {
    absl::StatusOr<gan::ModelConfig> config = gan::PresetConfig(preset);
    ASSERT_TRUE(config.ok()) << config.status();
    const bool angle = config->variable_angle();
    v1::ModelVersion m = Model();
    m.mutable_lineage()->set_model_preset(preset);
    m.mutable_lineage()->set_parent_model("calo:2");
    m.mutable_lineage()->set_study_id("study-1");
    m.mutable_bf16()->set_reason("within tolerance");
    auto& hp = *m.mutable_lineage()->mutable_hyper_parameters();
    hp["validation_holdout_fraction"] = "0.1";
    hp["validation_split_seed"] = "11";
    hp["validation_latent_seed"] = "7930";
    if (!angle) m.clear_theta_range_rad();
    for (v1::ExportProfile profile :
         {v1::EXPORT_PROFILE_GANTRY, v1::EXPORT_PROFILE_PAR04, v1::EXPORT_PROFILE_DDML}) {
      if (!CheckProfileFitsModel(profile, angle).ok()) continue;
      SCOPED_TRACE(preset + " " + ExportProfileName(profile));
      v1::ExportMetadata e = Exported(angle);
      e.set_profile(profile);
      e.set_format(profile == v1::EXPORT_PROFILE_DDML ? v1::EXPORT_FORMAT_TORCHSCRIPT
                                                      : v1::EXPORT_FORMAT_ONNX);
      e.clear_grid();
      for (int64_t n : config->grid) e.add_grid(n);
      const ProfileInterface interface =
          InterfaceOf(profile, config->grid, config->noise_dim(), angle);
      e.mutable_inputs()->Clear();
      e.mutable_outputs()->Clear();
      e.mutable_inputs()->Add(interface.inputs.begin(), interface.inputs.end());
      e.mutable_outputs()->Add(interface.outputs.begin(), interface.outputs.end());
      absl::StatusOr<std::string> card = ModelCardJson(m, e, "calo.file");
      ASSERT_TRUE(card.ok()) << card.status();
      Value root;
      *root.mutable_struct_value() = Parse(*card);
      std::set<std::string> allowed = {"validity.left_out_energy_gev", "validation.left_out",
                                       "validation.sample.folds", "validation.sample.fold"};
      if (!angle) allowed.insert("validity.theta_rad");
      std::vector<std::string> empty;
      CollectEmpty(root, "", allowed, &empty);
      EXPECT_TRUE(empty.empty()) << "empty: " << testing::PrintToString(empty) << "\n" << *card;
      EXPECT_EQ(At(root.struct_value(), {"interface", "latent", "size"}).number_value(),
                config->noise_dim());
      EXPECT_EQ(At(root.struct_value(), {"shower", "grid"}).list_value().values(2).number_value(),
                config->grid[2]);
    }
  }
}

TEST(ModelCardTest, ALeftOutEnergyBandIsShownWithItsControlAndKeptOutOfTheMetrics) {
  v1::ModelVersion m = Model();
  auto& hp = *m.mutable_lineage()->mutable_hyper_parameters();
  hp["left_out_energy_gev"] = "80-120";
  hp["left_out_control_energy_gev"] = "140-180";
  auto& metrics = *m.mutable_metrics();
  metrics["left_out_fom"] = 0.25;
  metrics["left_out_fom_null"] = 0.05;
  metrics["left_out_holdout_events"] = 41;
  metrics["left_out_control_fom"] = 0.125;
  metrics["left_out_control_holdout_events"] = 39;
  metrics["fpd"] = std::numeric_limits<double>::quiet_NaN();  // not JSON: written as null
  absl::StatusOr<std::string> card = ModelCardJson(m, Exported(false), "calo.onnx");
  ASSERT_TRUE(card.ok()) << card.status();
  const Struct s = Parse(*card);
  EXPECT_EQ(At(s, {"validity", "left_out_energy_gev", "min"}).number_value(), 80);
  EXPECT_EQ(At(s, {"validity", "left_out_energy_gev", "max"}).number_value(), 120);
  EXPECT_EQ(At(s, {"validation", "left_out", "energy_gev", "min"}).number_value(), 80);
  EXPECT_EQ(At(s, {"validation", "left_out", "metrics", "fom"}).number_value(), 0.25);
  EXPECT_EQ(At(s, {"validation", "left_out", "metrics", "fom_null"}).number_value(), 0.05);
  EXPECT_EQ(At(s, {"validation", "left_out", "metrics", "holdout_events"}).number_value(), 41);
  EXPECT_EQ(At(s, {"validation", "left_out", "metrics"}).struct_value().fields_size(), 3);
  EXPECT_EQ(At(s, {"validation", "left_out", "control", "energy_gev", "max"}).number_value(), 180);
  EXPECT_EQ(At(s, {"validation", "left_out", "control", "metrics", "fom"}).number_value(), 0.125);
  EXPECT_FALSE(At(s, {"validation", "metrics"}).struct_value().fields().count("left_out_fom"));
  EXPECT_TRUE(At(s, {"validation", "metrics", "fpd"}).has_null_value());

  // No control band recorded (none fitted beside the band): null; a malformed band: no band.
  hp.erase("left_out_control_energy_gev");
  const Struct without = Parse(*ModelCardJson(m, Exported(false), "calo.onnx"));
  EXPECT_TRUE(At(without, {"validation", "left_out", "control"}).has_null_value());
  hp["left_out_energy_gev"] = "120-80";
  const Struct malformed = Parse(*ModelCardJson(m, Exported(false), "calo.onnx"));
  EXPECT_TRUE(At(malformed, {"validation", "left_out"}).has_null_value());
}

TEST(ModelCardTest, AVariableAngleModelCarriesItsThetaInputAndRange) {
  absl::StatusOr<std::string> card = ModelCardJson(Model(), Exported(true), "calo.onnx");
  ASSERT_TRUE(card.ok()) << card.status();
  const Struct s = Parse(*card);
  const auto& conditions = At(s, {"interface", "conditions"}).list_value();
  ASSERT_EQ(conditions.values_size(), 2);
  EXPECT_EQ(conditions.values(1).struct_value().fields().at("unit").string_value(), "rad");
  EXPECT_EQ(At(s, {"validity", "theta_rad", "min"}).number_value(), 1.0471975511965976);
  EXPECT_EQ(At(s, {"validity", "theta_rad", "max"}).number_value(), 2.0943951023931953);
}

// Each profile's card says how its consumer feeds the file and reads the shower.
TEST(ModelCardTest, EachProfileCarriesItsContract) {
  Struct s = Parse(*ModelCardJson(Model(), Par04(false), "calo.onnx"));
  EXPECT_EQ(At(s, {"profile", "name"}).string_value(), "par04");
  EXPECT_EQ(At(s, {"interface", "latent", "size"}).number_value(), 16);
  EXPECT_EQ(At(s, {"interface", "latent", "input"}).string_value(), "input, columns 0..15");
  const auto& conditions = At(s, {"interface", "conditions"}).list_value();
  ASSERT_EQ(conditions.values_size(), 3);  // energy, angle slot, geometry slots
  EXPECT_EQ(conditions.values(0).struct_value().fields().at("encoding").string_value(),
            "E / 1024000 (Par04's fMaxEnergy)");
  EXPECT_NE(conditions.values(1).struct_value().fields().at("encoding").string_value().find(
                "ignored: the model is fixed-angle"),
            std::string::npos);
  EXPECT_NE(At(s, {"shower", "unit"}).string_value().find("fraction"), std::string::npos);
  EXPECT_EQ(At(s, {"shower", "grid"}).list_value().values(0).number_value(), 25);
  EXPECT_TRUE(At(s, {"validity", "theta_rad"}).has_null_value());
  s = Parse(*ModelCardJson(Model(), Par04(true), "calo.onnx"));
  EXPECT_EQ(At(s, {"validity", "theta_rad", "max"}).number_value(), 2.0943951023931953);

  v1::ExportMetadata ddml = Exported(false);
  ddml.set_format(v1::EXPORT_FORMAT_TORCHSCRIPT);
  ddml.set_profile(v1::EXPORT_PROFILE_DDML);
  ddml.mutable_inputs()->Clear();
  ddml.mutable_outputs()->Clear();
  AddTensor(ddml.mutable_inputs(), "latent", {-1, 16, 1, 1, 1});
  AddTensor(ddml.mutable_inputs(), "energy", {-1, 1, 1, 1, 1});
  AddTensor(ddml.mutable_outputs(), "shower", {-1, 25, 25, 25});
  s = Parse(*ModelCardJson(Model(), ddml, "calo.pt"));
  EXPECT_EQ(At(s, {"file", "format"}).string_value(), "torchscript");
  EXPECT_EQ(At(s, {"profile", "name"}).string_value(), "ddml");
  EXPECT_NE(At(s, {"interface", "latent", "prior"}).string_value().find("uniform in [-1, 1]"),
            std::string::npos);
  EXPECT_EQ(At(s, {"shower", "unit"}).string_value().substr(0, 3), "MeV");

  // A par04 card without its packed input is refused, naming the profile.
  v1::ExportMetadata broken = Par04(false);
  broken.mutable_inputs(0)->set_name("latent");
  absl::StatusOr<std::string> refused = ModelCardJson(Model(), broken, "x");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("par04 profile"), std::string::npos);
}

// GetModel's card: the registry entry's recorded interface, no file.
TEST(ModelCardTest, TheRegistryCardHasTheRecordedInterfaceAndNoFile) {
  v1::ModelVersion m = Model();
  EXPECT_EQ(RegistryModelCardJson(m).status().code(), absl::StatusCode::kFailedPrecondition);
  for (int64_t n : {25, 25, 25}) m.mutable_generator()->add_grid(n);
  m.mutable_generator()->set_latent_size(16);
  absl::StatusOr<std::string> card = RegistryModelCardJson(m);
  ASSERT_TRUE(card.ok()) << card.status();
  const Struct s = Parse(*card);
  EXPECT_TRUE(At(s, {"file"}).has_null_value());
  EXPECT_EQ(At(s, {"interface", "latent", "size"}).number_value(), 16);
  EXPECT_EQ(At(s, {"interface", "inputs"}).list_value().values_size(), 2);
  EXPECT_EQ(At(s, {"profile", "name"}).string_value(), "gantry");
  EXPECT_EQ(At(s, {"validity", "energy_gev", "max"}).number_value(), 200);
  EXPECT_TRUE(At(s, {"validity", "theta_rad"}).has_null_value());
  // The export's card and the registry's agree from the shower's layout on.
  const std::string exported = *ModelCardJson(m, Exported(false), "calo.onnx");
  ASSERT_NE(card->find(",\"shower\":"), std::string::npos);
  EXPECT_EQ(card->substr(card->find(",\"shower\":")),
            exported.substr(exported.find(",\"shower\":")));
  m.mutable_generator()->set_variable_angle(true);
  const Struct angled = Parse(*RegistryModelCardJson(m));
  EXPECT_EQ(At(angled, {"interface", "inputs"}).list_value().values_size(), 3);
  EXPECT_EQ(At(angled, {"validity", "theta_rad", "max"}).number_value(), 2.0943951023931953);
}

TEST(ModelCardTest, AFileDatasetHasNoToyMcSettings) {
  v1::ModelVersion m = Model();
  m.mutable_lineage()->set_dataset("ds-0123");
  const Struct s = Parse(*ModelCardJson(m, Exported(false), "calo.onnx"));
  EXPECT_TRUE(At(s, {"training", "toy_mc"}).has_null_value());
  EXPECT_EQ(At(s, {"training", "dataset"}).string_value(), "ds-0123");
}

TEST(ModelCardTest, AnExportOfAnotherModelOrCheckpointOrWithoutItsTensorsIsRefused) {
  v1::ExportMetadata other = Exported(false);
  other.set_model_ref("calo:4");
  EXPECT_EQ(ModelCardJson(Model(), other, "x").status().code(),
            absl::StatusCode::kInvalidArgument);
  other = Exported(false);
  other.set_checkpoint_sha256(std::string(64, 'f'));
  EXPECT_EQ(ModelCardJson(Model(), other, "x").status().code(),
            absl::StatusCode::kInvalidArgument);
  other = Exported(false);
  other.mutable_outputs()->Clear();
  EXPECT_EQ(ModelCardJson(Model(), other, "x").status().code(),
            absl::StatusCode::kInvalidArgument);
  other = Exported(false);
  other.mutable_inputs(0)->set_name("noise");
  EXPECT_EQ(ModelCardJson(Model(), other, "x").status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gantry::jobspec
