#include "workers/serving/generation_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "workers/serving/counter_rng.h"

namespace gantry::serving {
namespace {

namespace v1 = ::gantry::v1;

// Training ranges are closed intervals; a little slack absorbs float round trips.
bool Inside(double v, double lo, double hi) {
  const double slack = 1e-9 * std::max(1.0, std::abs(hi));
  return v >= lo - slack && v <= hi + slack;
}

bool RangeSet(const v1::Range& r) { return r.max() > 0 && r.max() >= r.min(); }

// The request's options besides the conditions: seed, precision and chunk size.
absl::Status CheckOptions(const v1::GenerateRequest& r, int max_chunk_showers,
                          const ModelTraits& traits) {
  if (r.seed() == 0) {
    return absl::InvalidArgumentError("request.seed: 0 (the server draws a seed; send it)");
  }
  if (r.precision() == v1::PRECISION_BF16 && !traits.bf16_unavailable.empty()) {
    return absl::FailedPreconditionError(traits.bf16_unavailable);
  }
  if (r.chunk_showers() < 0 || r.chunk_showers() > max_chunk_showers) {
    return absl::InvalidArgumentError(absl::StrCat("request.chunk_showers: ", r.chunk_showers(),
                                                   " is outside 0..", max_chunk_showers));
  }
  return absl::OkStatus();
}

// A requested range: min <= max, then both ends, min first.
template <typename Check>
absl::Status CheckRange(const v1::Range& range, absl::string_view field, const Check& check) {
  if (range.min() > range.max()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": needs min <= max"));
  }
  if (absl::Status s = check(range.min(), [&] { return absl::StrCat(field, ".min"); }); !s.ok()) {
    return s;
  }
  return check(range.max(), [&] { return absl::StrCat(field, ".max"); });
}

}  // namespace

// The training ranges conditions must lie in: the served model's, else the model config's (angles)
// or unbounded (energies). `field()` names the checked field; it is only formatted for an error.
class GenerationPlan::TrainingRanges {
 public:
  TrainingRanges(const v1::ServedModel& model, const ModelTraits& traits)
      : t_lo_(traits.theta_min_rad), t_hi_(traits.theta_max_rad) {
    if (RangeSet(model.energy_range_gev())) {
      e_lo_ = model.energy_range_gev().min();
      e_hi_ = model.energy_range_gev().max();
    }
    if (RangeSet(model.theta_range_rad())) {
      t_lo_ = model.theta_range_rad().min();
      t_hi_ = model.theta_range_rad().max();
    }
  }

  double theta_lo() const { return t_lo_; }
  double theta_hi() const { return t_hi_; }

  template <typename Field>
  absl::Status CheckEnergy(double e, const Field& field) const {
    if (!std::isfinite(e) || e <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(field(), ": ", e, " GeV must be > 0"));
    }
    if (!Inside(e, e_lo_, e_hi_)) {
      return absl::InvalidArgumentError(absl::StrCat(field(), ": ", e,
                                                     " GeV is outside the model's training range ",
                                                     e_lo_, "..", e_hi_, " GeV"));
    }
    return absl::OkStatus();
  }

  template <typename Field>
  absl::Status CheckTheta(double t, const Field& field) const {
    if (!std::isfinite(t) || !Inside(t, t_lo_, t_hi_)) {
      return absl::InvalidArgumentError(absl::StrCat(field(), ": ", t,
                                                     " rad is outside the model's training range ",
                                                     t_lo_, "..", t_hi_, " rad"));
    }
    return absl::OkStatus();
  }

 private:
  double e_lo_ = 0, e_hi_ = std::numeric_limits<double>::infinity();
  double t_lo_, t_hi_;
};

absl::StatusOr<GenerationPlan> GenerationPlan::Create(const v1::WorkerGenerateRequest& request,
                                                      const ModelTraits& traits) {
  const v1::GenerateRequest& r = request.request();
  if (absl::Status s = CheckOptions(r, kMaxChunkShowers, traits); !s.ok()) return s;
  GenerationPlan plan;
  plan.model_ref_ = request.model().model_ref();
  plan.variable_angle_ = traits.variable_angle;
  plan.seed_ = r.seed();
  plan.bfloat16_ = r.precision() == v1::PRECISION_BF16;
  plan.chunk_showers_ = r.chunk_showers() == 0 ? kDefaultChunkShowers : r.chunk_showers();

  const TrainingRanges ranges(request.model(), traits);
  if (r.has_list()) {
    if (absl::Status s = plan.SetList(r.list(), ranges); !s.ok()) return s;
    return plan;
  }
  if (!r.has_range()) {
    return absl::InvalidArgumentError("request: give conditions (list or range)");
  }
  if (absl::Status s = plan.SetRange(r.range(), ranges); !s.ok()) return s;
  return plan;
}

absl::Status GenerationPlan::SetList(const v1::ConditionList& list, const TrainingRanges& ranges) {
  const auto& items = list.items();
  if (items.empty()) return absl::InvalidArgumentError("request.list: no conditions");
  if (items.size() > kMaxShowers) {
    return absl::InvalidArgumentError(absl::StrCat("request.list: more than ", kMaxShowers));
  }
  count_ = items.size();
  energies_.reserve(items.size());
  for (int i = 0; i < items.size(); ++i) {
    auto field = [i](absl::string_view leaf) {
      return [i, leaf] { return absl::StrCat("request.list.items[", i, "].", leaf); };
    };
    if (absl::Status s = ranges.CheckEnergy(items[i].energy_gev(), field("energy_gev")); !s.ok()) {
      return s;
    }
    energies_.push_back(static_cast<float>(items[i].energy_gev()));
    if (variable_angle_) {
      double t = items[i].theta_rad();
      if (t == 0) t = 0.5 * (ranges.theta_lo() + ranges.theta_hi());
      if (absl::Status s = ranges.CheckTheta(t, field("theta_rad")); !s.ok()) return s;
      thetas_.push_back(static_cast<float>(t));
    }
  }
  return absl::OkStatus();
}

absl::Status GenerationPlan::SetRange(const v1::ConditionRange& range,
                                      const TrainingRanges& ranges) {
  if (range.count() < 1 || range.count() > kMaxShowers) {
    return absl::InvalidArgumentError(
        absl::StrCat("request.range.count: ", range.count(), " is outside 1..", kMaxShowers));
  }
  count_ = range.count();
  const auto check_energy = [&](double e, const auto& field) {
    return ranges.CheckEnergy(e, field);
  };
  const auto check_theta = [&](double t, const auto& field) { return ranges.CheckTheta(t, field); };
  if (!range.has_energy_gev()) {
    return absl::InvalidArgumentError("request.range.energy_gev: needs min <= max");
  }
  if (absl::Status s = CheckRange(range.energy_gev(), "request.range.energy_gev", check_energy);
      !s.ok()) {
    return s;
  }
  energy_min_ = range.energy_gev().min();
  energy_max_ = range.energy_gev().max();
  if (!variable_angle_) return absl::OkStatus();
  theta_min_ = ranges.theta_lo();
  theta_max_ = ranges.theta_hi();
  if (!range.has_theta_rad()) return absl::OkStatus();
  if (absl::Status s = CheckRange(range.theta_rad(), "request.range.theta_rad", check_theta);
      !s.ok()) {
    return s;
  }
  theta_min_ = range.theta_rad().min();
  theta_max_ = range.theta_rad().max();
  return absl::OkStatus();
}

ShowerSpec GenerationPlan::Shower(int64_t index) const {
  ShowerSpec s;
  s.seed = seed_;
  s.index = index;
  s.bfloat16 = bfloat16_;
  if (!energies_.empty()) {
    s.energy_gev = energies_[static_cast<size_t>(index)];
    if (variable_angle_) s.theta_rad = thetas_[static_cast<size_t>(index)];
    return s;
  }
  const auto u = [&](uint32_t stream) {
    return CounterRng::Uniform(seed_, static_cast<uint64_t>(index), stream);
  };
  s.energy_gev =
      static_cast<float>(energy_min_ + (energy_max_ - energy_min_) * u(CounterRng::kEnergyStream));
  if (variable_angle_) {
    s.theta_rad =
        static_cast<float>(theta_min_ + (theta_max_ - theta_min_) * u(CounterRng::kThetaStream));
  }
  return s;
}

}  // namespace gantry::serving
