// The physics of an exported file against its model card: redoes the training job's validation
// from what the card records (the dataset, the hold-out split, the latent seed) with the exported
// TorchScript file (gantry profile, or par04 fed as Par04's hook packs it) in place of gantry's
// generator, scores the showers with gantry's validation (workers/physics) and checks the
// metrics of record. The file reproduces gantry's generation to about 2e-7, so the metrics agree
// to far better than their statistical floors; a wrong latent order, energy encoding or cell
// order would not.
//
// usage: card_metrics_check FILE.ts FILE.ts.card.json DATASET.h5
//   DATASET.h5: the training data (for toy MC: gantry-toymc with the card's training.toy_mc
//   settings).
// Prints metric, card, recomputed, |difference|; exit 0 when every one agrees, 1 otherwise.
#include <torch/script.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/sha256.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "showers/shower_file_reader.h"
#include "workers/physics/validation.h"
#include "workers/runner/holdout_split.h"

namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

int Fail(const std::string& message) {
  std::fprintf(stderr, "card_metrics_check: %s\n", message.c_str());
  return 1;
}

// The member at `path`, or nullptr.
const Value* Find(const Struct& s, std::initializer_list<const char*> path) {
  const Struct* at = &s;
  const Value* v = nullptr;
  for (const char* key : path) {
    if (at == nullptr || !at->fields().contains(key)) return nullptr;
    v = &at->fields().at(key);
    at = v->has_struct_value() ? &v->struct_value() : nullptr;
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) return Fail("usage: card_metrics_check FILE.ts FILE.ts.card.json DATASET.h5");
  std::ifstream card_file(argv[2]);
  std::stringstream text;
  text << card_file.rdbuf();
  Struct card;
  if (!google::protobuf::util::JsonStringToMessage(text.str(), &card).ok()) {
    return Fail(std::string(argv[2]) + " is not JSON");
  }
  const Value* profile = Find(card, {"profile", "name"});
  if (profile == nullptr ||
      (profile->string_value() != "gantry" && profile->string_value() != "par04")) {
    return Fail("the card is not of a gantry- or par04-profile export");
  }
  const bool par04 = profile->string_value() == "par04";
  const Value* sample = Find(card, {"validation", "sample"});
  if (sample == nullptr || !sample->has_struct_value()) {
    return Fail("the card records no validation sample (validation.sample is null)");
  }
  const Struct& s = sample->struct_value();
  if (Find(s, {"split"})->string_value() != "holdout") return Fail("only a hold-out split here");
  const double fraction = Find(s, {"holdout_fraction"})->number_value();
  const auto split_seed = static_cast<uint64_t>(Find(s, {"split_seed"})->number_value());
  const auto latent_seed = static_cast<uint64_t>(Find(s, {"latent_seed"})->number_value());
  const auto latent =
      static_cast<int64_t>(Find(card, {"interface", "latent", "size"})->number_value());
  if (Find(card, {"shower", "grid"}) == nullptr ||
      Find(card, {"validity", "theta_rad"}) == nullptr ||
      !Find(card, {"validity", "theta_rad"})->has_null_value()) {
    return Fail("only fixed-angle models here");
  }

  // The dataset the card names: byte for byte when it is the training file itself; a toy MC
  // sample regenerated with gantry-toymc is written by another writer (other bytes, the same
  // events), and only metrics that match to 1e-4 show that the events are the same.
  absl::StatusOr<std::string> sha = gantry::Sha256OfFile(argv[3]);
  if (!sha.ok()) return Fail(std::string(sha.status().message()));
  const std::string want_sha = Find(card, {"training", "dataset_sha256"})->string_value();
  std::printf("dataset: %s\n", *sha == want_sha ? "the training file (sha256 as the card's)"
                                                : "not the training file's bytes (regenerated?)");
  auto reader = gantry::showers::ShowerFileReader::Open(argv[3]);
  if (!reader.ok()) return Fail(std::string(reader.status().message()));
  auto split = gantry::runner::SplitHoldout((*reader)->events(), fraction, split_seed);
  if (!split.ok()) return Fail(std::string(split.status().message()));
  auto holdout = (*reader)->ReadEvents(split->holdout);
  if (!holdout.ok()) return Fail(std::string(holdout.status().message()));
  holdout->particle = (*reader)->particle();

  // One shower per held-out event, in split order, latents as the card says: one CPU generator
  // seeded with latent_seed, randn [n, latent] per batch of 64.
  const int64_t n = std::min<int64_t>(holdout->events(), 2000);
  torch::jit::Module module = torch::jit::load(argv[1]);
  module.eval();
  gantry::showers::ShowerSet generated;
  generated.shape = holdout->shape;
  generated.particle = holdout->particle;
  generated.energy_gev.assign(holdout->energy_gev.begin(), holdout->energy_gev.begin() + n);
  generated.cells.resize(static_cast<size_t>(n * generated.cells_per_event()));
  {
    c10::InferenceMode guard;
    at::Generator rng = at::make_generator<at::CPUGeneratorImpl>(latent_seed);
    for (int64_t first = 0; first < n; first += 64) {
      const int64_t count = std::min<int64_t>(64, n - first);
      const at::Tensor noise = at::randn({count, latent}, rng, at::kFloat);
      const at::Tensor energy =
          torch::from_blob(generated.energy_gev.data() + first, {count, 1}, torch::kFloat).clone();
      at::Tensor showers;
      if (par04) {
        // As Par04's hook packs it: [latent, E / 1,024,000 MeV, theta / (pi/2) (a fixed-angle
        // model ignores it: pi/2), two geometry slots]; cells come back as fractions of E.
        const at::Tensor packed = at::cat(
            {noise, energy * (1000.0 / 1024000.0), at::ones({count, 1}), at::zeros({count, 2})},
            1);
        showers = (module.forward({packed}).toTensor() * energy).contiguous();
      } else {
        showers = module.forward({noise, energy}).toTensor().contiguous();
      }
      if (showers.numel() != count * generated.cells_per_event()) {
        return Fail("the file's output has " + std::to_string(showers.numel()) + " cells for " +
                    std::to_string(count) + " showers");
      }
      std::copy_n(showers.data_ptr<float>(), showers.numel(),
                  generated.cells.data() + first * generated.cells_per_event());
    }
  }
  gantry::physics::ValidationOptions options;
  options.default_energy_bins = static_cast<int>(std::clamp<int64_t>(holdout->events() / 20, 1, 4));
  auto report = gantry::physics::ValidateShowers(*holdout, generated, options);
  if (!report.ok()) return Fail(std::string(report.status().message()));

  // The metrics of record against the recomputed ones. Means and distances agree to 1e-4
  // (relative) or 1e-6 (absolute); the classifier AUCs are left out (a classifier trained on
  // showers that differ in the seventh digit may stop at another epoch).
  const Value* metrics = Find(card, {"validation", "metrics"});
  if (metrics == nullptr) return Fail("the card has no validation.metrics");
  const std::vector<std::pair<std::string, std::string>> compared = {
      {"fom", "fom"},           {"eprof", "eprof"},
      {"pos", "pos"},           {"mre_sampling_fraction", "sf_mre"},
      {"fpd", "fpd"},           {"sep_mean", "sep_mean"},
      {"generated_events", ""}, {"holdout_events", ""}};
  int failed = 0;
  std::printf("%-24s %14s %14s %10s\n", "metric", "card", "file", "|diff|");
  for (const auto& [card_key, report_key] : compared) {
    const Value* want = Find(metrics->struct_value(), {card_key.c_str()});
    if (want == nullptr || !want->has_number_value()) {
      std::printf("%-24s %14s\n", card_key.c_str(), "not in the card");
      ++failed;
      continue;
    }
    const double got = report_key.empty() ? (card_key == "generated_events"
                                                 ? static_cast<double>(generated.events())
                                                 : static_cast<double>(holdout->events()))
                                          : report->metrics[report_key];
    const double diff = std::abs(got - want->number_value());
    const bool ok = diff <= std::max(1e-6, 1e-4 * std::abs(want->number_value()));
    std::printf("%-24s %14.8g %14.8g %10.3g%s\n", card_key.c_str(), want->number_value(), got, diff,
                ok ? "" : "  DIFFERS");
    if (!ok) ++failed;
  }
  if (failed > 0) return Fail(std::to_string(failed) + " metrics differ from the card's");
  std::printf(
      "card_metrics_check: the file reproduces the card's metrics from %lld held-out "
      "events\n",
      static_cast<long long>(holdout->events()));
  return 0;
}
