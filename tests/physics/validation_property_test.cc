// Property tests of workers/physics/validation over random and degenerate inputs: a seeded
// generator of ShowerSets (empty, sparse, huge values, NaN/Inf/negative cells, single events,
// mismatched energy ranges, uniform garbage, toy Monte Carlo). Every report must be finite, every
// relative error and its null in [0, 1], the symmetric metrics symmetric, identical samples at 0,
// independent toy samples at their null and garbage large but bounded.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "showers/toy_mc.h"
#include "workers/physics/validation.h"

namespace gantry::physics {
namespace {

using showers::Layout;
using showers::ShowerSet;

// The kinds of sample the generator makes.
enum class Kind { kToyLike, kEmpty, kSparse, kHuge, kInvalid, kGarbage, kOneCell, kCount };

const char* KindName(Kind k) {
  switch (k) {
    case Kind::kToyLike:
      return "toy-like";
    case Kind::kEmpty:
      return "empty";
    case Kind::kSparse:
      return "sparse";
    case Kind::kHuge:
      return "huge";
    case Kind::kInvalid:
      return "invalid";
    case Kind::kGarbage:
      return "garbage";
    case Kind::kOneCell:
      return "one-cell";
    default:
      return "?";
  }
}

// A small grid (depth along z) keeps a case fast; the code paths are those of 25x25x25.
constexpr std::array<int64_t, 3> kShape = {6, 5, 8};

ShowerSet RandomSet(std::mt19937_64& rng, Kind kind, int64_t events, double emin, double emax) {
  ShowerSet s;
  s.layout = Layout::kFixedAngle3DGan;
  s.shape = kShape;
  s.cells.assign(events * s.cells_per_event(), 0.0f);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const float special[] = {std::numeric_limits<float>::quiet_NaN(),
                           std::numeric_limits<float>::infinity(),
                           -std::numeric_limits<float>::infinity(), -1.0f, -1e-9f};
  for (int64_t e = 0; e < events; ++e) {
    const double energy = emin + (emax - emin) * u(rng);
    s.energy_gev.push_back(static_cast<float>(energy));
    float* c = s.mutable_event(e);
    const int64_t n = s.cells_per_event();
    switch (kind) {
      case Kind::kToyLike:  // a Gaussian blob, depth peak near the middle, SF ~ 2%
      case Kind::kInvalid: {
        for (int64_t x = 0; x < kShape[0]; ++x) {
          for (int64_t y = 0; y < kShape[1]; ++y) {
            for (int64_t z = 0; z < kShape[2]; ++z) {
              const double r2 = (x - 2.5) * (x - 2.5) + (y - 2.0) * (y - 2.0);
              const double w = std::exp(-r2 / 2.0 - (z - 3.5) * (z - 3.5) / 6.0);
              c[(x * kShape[1] + y) * kShape[2] + z] =
                  static_cast<float>(0.02 * energy * w / 20.0 * (0.8 + 0.4 * u(rng)));
            }
          }
        }
        if (kind == Kind::kInvalid) {
          for (int k = 0; k < 3; ++k) c[rng() % n] = special[rng() % 5];
        }
        break;
      }
      case Kind::kEmpty:
        break;
      case Kind::kSparse:
        for (int k = 0; k < 3; ++k) c[rng() % n] = static_cast<float>(u(rng) * 0.1);
        break;
      case Kind::kHuge:
        for (int64_t i = 0; i < n; ++i) c[i] = static_cast<float>(u(rng) * 3e38);
        break;
      case Kind::kGarbage:
        for (int64_t i = 0; i < n; ++i) c[i] = static_cast<float>(u(rng) * 10.0);
        break;
      case Kind::kOneCell:
        c[rng() % n] = static_cast<float>(1e-3 + u(rng));
        break;
      default:
        break;
    }
  }
  return s;
}

bool IsRelativeError(const std::string& key) {
  for (const char* prefix : {"sf_relative_error", "sf_mre", "eprof", "pos", "shower_max_relative",
                             "centroid_depth_relative", "separation_power"}) {
    if (key.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

// Every number finite; relative errors, their nulls and separation powers in [0, 1]; fom <= 2.
// Field metrics at their cheapest (one classifier seed, a few epochs): the property tests check
// that hostile samples keep them finite and bounded, not their statistics.
void CheapFieldMetrics(ValidationOptions& o) {
  for (ClassifierOptions* c : {&o.field.features_classifier, &o.field.cells_classifier_options}) {
    c->seeds = 1;
    c->max_epochs = 3;
  }
}

void CheckReport(const ValidationReport& r, const std::string& what) {
  auto check_map = [&](const std::map<std::string, double>& m, const std::string& where) {
    for (const auto& [key, value] : m) {
      ASSERT_TRUE(std::isfinite(value)) << what << " " << where << " " << key;
      if (IsRelativeError(key)) {
        EXPECT_GE(value, 0.0) << what << " " << where << " " << key;
        EXPECT_LE(value, 1.0) << what << " " << where << " " << key;
      }
    }
    auto fom = m.find("fom");
    if (fom != m.end()) EXPECT_LE(fom->second, 2.0) << what << " " << where;
  };
  check_map(r.metrics, "report");
  for (const auto& [key, value] : r.metrics) {
    if (key.rfind("auc_", 0) == 0 || key.rfind("sep", 0) == 0) {
      EXPECT_GE(value, 0.0) << what << " " << key;
      EXPECT_LE(value, 1.0) << what << " " << key;
    }
    if (key.find("fpd") != std::string::npos || key.find("_ratio") != std::string::npos) {
      EXPECT_GE(value, 0.0) << what << " " << key;
    }
  }
  for (const std::string key :
       {"fom", "eprof", "eprof_longitudinal", "eprof_transverse", "pos", "sf_mre",
        "sf_relative_error_max", "shower_max_relative_error", "centroid_depth_relative_error",
        "separation_power", "invalid_cells_generated"}) {
    EXPECT_EQ(r.metrics.count(key), 1u) << what << " " << key;
  }
  for (const BinMetrics& b : r.bins) check_map(b.metrics, "bin");
  for (const Histogram& h : r.histograms) {
    for (const auto* v :
         {&h.edges, &h.reference, &h.generated, &h.reference_error, &h.generated_error, &h.x}) {
      for (double x : *v) ASSERT_TRUE(std::isfinite(x)) << what << " histogram " << h.name;
    }
  }
}

// The metrics that must not change when reference and generated swap (with explicit bins).
const char* const kSymmetric[] = {"sf_mre",
                                  "sf_mre_null",
                                  "sf_relative_error_max",
                                  "sf_relative_error_max_null",
                                  "eprof",
                                  "eprof_null",
                                  "eprof_longitudinal",
                                  "eprof_longitudinal_null",
                                  "eprof_transverse",
                                  "eprof_transverse_null",
                                  "pos",
                                  "pos_null",
                                  "shower_max_relative_error",
                                  "shower_max_relative_error_null",
                                  "centroid_depth_relative_error",
                                  "centroid_depth_relative_error_null"};

TEST(ValidationPropertyTest, RandomAndDegenerateSamplesGiveFiniteBoundedSymmetricMetrics) {
  std::mt19937_64 rng(20261125);
  const int64_t sizes[] = {1, 2, 3, 12, 40};
  int ok = 0, no_bins = 0;
  for (int trial = 0; trial < 120; ++trial) {
    const Kind kr = static_cast<Kind>(rng() % static_cast<int>(Kind::kCount));
    const Kind kg = static_cast<Kind>(rng() % static_cast<int>(Kind::kCount));
    const int64_t nr = sizes[rng() % 5], ng = sizes[rng() % 5];
    // Mismatched energy ranges in a third of the cases (partly or fully disjoint).
    const double shift = trial % 3 == 0 ? 60.0 * (rng() % 3) : 0.0;
    const ShowerSet ref = RandomSet(rng, kr, nr, 10, 110);
    const ShowerSet gen = RandomSet(rng, kg, ng, 10 + shift, 110 + shift);
    ValidationOptions o;
    CheapFieldMetrics(o);
    o.min_events_per_bin = 1 + static_cast<int64_t>(rng() % 2);
    if (trial % 2 == 0) o.energy_edges_gev = {10, 60, 110, 170};
    const std::string what = std::string("trial ") + std::to_string(trial) + " " + KindName(kr) +
                             "(" + std::to_string(nr) + ") vs " + KindName(kg) + "(" +
                             std::to_string(ng) + ")";
    absl::StatusOr<ValidationReport> r = ValidateShowers(ref, gen, o);
    if (!r.ok()) {
      // The only refusal for valid input: no bin with enough events in both samples.
      EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << what << r.status();
      ++no_bins;
      continue;
    }
    ++ok;
    CheckReport(*r, what);
    if (kg == Kind::kInvalid) EXPECT_GT(r->metrics.at("invalid_cells_generated"), 0) << what;
    if (kg != Kind::kInvalid) EXPECT_EQ(r->metrics.at("invalid_cells_generated"), 0) << what;

    // A sample against itself: every difference metric is exactly 0.
    absl::StatusOr<ValidationReport> self = ValidateShowers(ref, ref, o);
    if (self.ok()) {
      CheckReport(*self, what + " self");
      for (const char* key : kSymmetric) {
        if (std::string(key).find("_null") == std::string::npos) {
          EXPECT_EQ(self->metrics.at(key), 0.0) << what << " self " << key;
        }
      }
      EXPECT_EQ(self->metrics.at("separation_power"), 0.0) << what;
    }

    // Swapped, with the same explicit bins: the symmetric metrics do not change.
    if (!o.energy_edges_gev.empty()) {
      absl::StatusOr<ValidationReport> swapped = ValidateShowers(gen, ref, o);
      ASSERT_TRUE(swapped.ok()) << what << swapped.status();
      CheckReport(*swapped, what + " swapped");
      for (const char* key : kSymmetric) {
        EXPECT_NEAR(swapped->metrics.at(key), r->metrics.at(key),
                    1e-12 * (1 + std::fabs(r->metrics.at(key))))
            << what << " " << key;
      }
    }
  }
  // The generator must exercise both outcomes.
  EXPECT_GT(ok, 40);
  EXPECT_GT(no_bins, 0);
}

showers::ToyMcConfig ToyConfig(uint64_t seed, int64_t events) {
  showers::ToyMcConfig c;
  c.events = events;
  c.seed = seed;
  c.energy_min_gev = 50;
  c.energy_max_gev = 150;
  c.threads = 2;
  return c;
}

ShowerSet Toy(uint64_t seed, int64_t events = 160) {
  absl::StatusOr<ShowerSet> s = showers::SimulateToyMc(ToyConfig(seed, events));
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

ValidationOptions TwoBins() {
  ValidationOptions o;
  o.energy_edges_gev = {50, 100, 150};
  o.field_metrics = false;  // tests/physics/field_metrics_test.cc calibrates those
  return o;
}

ValidationOptions TwoBinsWithFieldMetrics() {
  ValidationOptions o = TwoBins();
  o.field_metrics = true;
  CheapFieldMetrics(o);
  return o;
}

// The nulls are calibrated: over independent pairs of toy samples of one distribution, each
// metric's mean is its mean null (a ratio near 1; 0.5-1.6 leaves room for 8 pairs and for the
// small excess of |a - b| / max(a, b) over |a - b| / a).
TEST(ValidationPropertyTest, IndependentToySamplesScoreAtTheirNull) {
  const char* keys[] = {"sf_mre",
                        "sf_relative_error_max",
                        "eprof",
                        "eprof_longitudinal",
                        "eprof_transverse",
                        "pos",
                        "shower_max_relative_error",
                        "centroid_depth_relative_error"};
  std::map<std::string, double> value, null;
  constexpr int kPairs = 8;
  for (int p = 0; p < kPairs; ++p) {
    absl::StatusOr<ValidationReport> r =
        ValidateShowers(Toy(100 + 2 * p), Toy(101 + 2 * p), TwoBins());
    ASSERT_TRUE(r.ok()) << r.status();
    CheckReport(*r, "toy pair");
    for (const char* key : keys) {
      value[key] += r->metrics.at(key) / kPairs;
      null[key] += r->metrics.at(std::string(key) + "_null") / kPairs;
    }
  }
  for (const char* key : keys) {
    std::printf("%-30s mean %.5f  mean null %.5f  ratio %.2f\n", key, value[key], null[key],
                value[key] / null[key]);
    EXPECT_GT(null[key], 0.0) << key;
    EXPECT_GT(value[key] / null[key], 0.5) << key << " " << value[key] << " null " << null[key];
    EXPECT_LT(value[key] / null[key], 1.6) << key << " " << value[key] << " null " << null[key];
  }
}

// With one bin the worst bin is that bin, and the expected maximum is the bin's own null.
TEST(ValidationPropertyTest, WorstBinNullOfOneBinIsTheBinNull) {
  ValidationOptions o;
  o.energy_edges_gev = {50, 150};
  absl::StatusOr<ValidationReport> r = ValidateShowers(Toy(1), Toy(2), o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->bins.size(), 1u);
  for (const char* key : {"shower_max_relative_error", "centroid_depth_relative_error"}) {
    EXPECT_DOUBLE_EQ(r->metrics.at(key), r->bins[0].metrics.at(key));
    EXPECT_NEAR(r->metrics.at(std::string(key) + "_null"),
                r->bins[0].metrics.at(std::string(key) + "_null"),
                1e-6 * r->bins[0].metrics.at(std::string(key) + "_null"));
  }
  EXPECT_NEAR(r->metrics.at("sf_relative_error_max_null"),
              r->bins[0].metrics.at("sf_relative_error_null"),
              1e-6 * r->bins[0].metrics.at("sf_relative_error_null"));
  // More bins: the expected worst bin exceeds every bin's own null.
  absl::StatusOr<ValidationReport> two = ValidateShowers(Toy(1), Toy(2), TwoBins());
  ASSERT_TRUE(two.ok()) << two.status();
  for (const BinMetrics& b : two->bins) {
    EXPECT_GT(two->metrics.at("sf_relative_error_max_null"),
              b.metrics.at("sf_relative_error_null"));
  }
}

// Generators a training run can produce: all-empty showers score the maximum of every relative
// error (1), uniform noise and huge values score large but bounded, NaN cells are counted and do
// not spread.
TEST(ValidationPropertyTest, GarbageScoresLargeButBounded) {
  const ShowerSet ref = Toy(1);
  std::mt19937_64 rng(7);
  auto like = [&](Kind kind) {
    ShowerSet s = RandomSet(rng, kind, ref.events(), 50, 150);
    s.shape = ref.shape;
    s.cells.assign(ref.cells.size(), 0.0f);
    s.energy_gev = ref.energy_gev;
    std::uniform_real_distribution<double> u(0.0, 1.0);
    for (float& c : s.cells) {
      if (kind == Kind::kGarbage) c = static_cast<float>(1e-3 * u(rng));  // untrained: flat noise
      if (kind == Kind::kHuge) c = static_cast<float>(3e38 * u(rng));
    }
    return s;
  };
  absl::StatusOr<ValidationReport> empty =
      ValidateShowers(ref, like(Kind::kEmpty), TwoBinsWithFieldMetrics());
  ASSERT_TRUE(empty.ok()) << empty.status();
  CheckReport(*empty, "empty");
  for (const char* key : {"sf_mre", "eprof", "eprof_longitudinal", "eprof_transverse", "pos",
                          "shower_max_relative_error", "centroid_depth_relative_error"}) {
    EXPECT_NEAR(empty->metrics.at(key), 1.0, 1e-12) << key;  // means of 1s, up to rounding
  }
  EXPECT_NEAR(empty->metrics.at("fom"), 2.0, 1e-12);

  for (Kind kind : {Kind::kGarbage, Kind::kHuge}) {
    absl::StatusOr<ValidationReport> r =
        ValidateShowers(ref, like(kind), TwoBinsWithFieldMetrics());
    ASSERT_TRUE(r.ok()) << r.status();
    CheckReport(*r, KindName(kind));
    EXPECT_GT(r->metrics.at("sep_mean"), 0.5) << KindName(kind);
    EXPECT_GT(r->metrics.at("eprof"), 0.3) << KindName(kind);
    EXPECT_GT(r->metrics.at("sf_relative_error_max"), 0.3) << KindName(kind);
    EXPECT_GT(r->metrics.at("fom"), 20 * r->metrics.at("pos_null")) << KindName(kind);
    EXPECT_GT(r->metrics.at("separation_power"), 0.5) << KindName(kind);
  }

  // A toy sample with a NaN in every event: counted, and the metrics stay at the statistical floor.
  ShowerSet nan = Toy(2);
  for (int64_t e = 0; e < nan.events(); ++e) {
    nan.mutable_event(e)[0] = std::numeric_limits<float>::quiet_NaN();
  }
  absl::StatusOr<ValidationReport> r = ValidateShowers(ref, nan, TwoBins());
  ASSERT_TRUE(r.ok()) << r.status();
  CheckReport(*r, "nan");
  EXPECT_EQ(r->metrics.at("invalid_cells_generated"), static_cast<double>(nan.events()));
  EXPECT_EQ(r->metrics.at("invalid_events_generated"), static_cast<double>(nan.events()));
  EXPECT_LT(r->metrics.at("eprof"), 2.5 * r->metrics.at("eprof_null"));
}

TEST(ValidationPropertyTest, RejectsNonFiniteOrNegativePrimaryEnergy) {
  ShowerSet s = Toy(3, 10);
  for (float bad :
       {std::numeric_limits<float>::quiet_NaN(), -5.0f, std::numeric_limits<float>::infinity()}) {
    ShowerSet g = s;
    g.energy_gev[4] = bad;
    absl::Status st = ValidateShowers(s, g, TwoBins()).status();
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_NE(st.message().find("generated sample: the primary energy of event 4"),
              std::string::npos)
        << st;
  }
}

}  // namespace
}  // namespace gantry::physics
