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

}  // namespace

absl::StatusOr<GenerationPlan> GenerationPlan::Create(const v1::WorkerGenerateRequest& request,
                                                      const ModelTraits& traits) {
  const v1::GenerateRequest& r = request.request();
  GenerationPlan plan;
  plan.model_ref_ = request.model().model_ref();
  plan.variable_angle_ = traits.variable_angle;
  if (r.seed() == 0) {
    return absl::InvalidArgumentError("request.seed: 0 (the server draws a seed; send it)");
  }
  plan.seed_ = r.seed();
  if (r.precision() == v1::PRECISION_BF16) {
    return absl::UnimplementedError(
        "precision BF16 is not served by this worker yet; use PRECISION_FP32");
  }
  if (r.chunk_showers() < 0 || r.chunk_showers() > kMaxChunkShowers) {
    return absl::InvalidArgumentError(absl::StrCat("request.chunk_showers: ", r.chunk_showers(),
                                                   " is outside 0..", kMaxChunkShowers));
  }
  plan.chunk_showers_ = r.chunk_showers() == 0 ? kDefaultChunkShowers : r.chunk_showers();

  const v1::ServedModel& model = request.model();
  double e_lo = 0, e_hi = std::numeric_limits<double>::infinity();
  if (RangeSet(model.energy_range_gev())) {
    e_lo = model.energy_range_gev().min();
    e_hi = model.energy_range_gev().max();
  }
  double t_lo = traits.theta_min_rad, t_hi = traits.theta_max_rad;
  if (RangeSet(model.theta_range_rad())) {
    t_lo = model.theta_range_rad().min();
    t_hi = model.theta_range_rad().max();
  }
  // `field()` names the checked field; it is only formatted for an error.
  auto check_energy = [&](double e, const auto& field) -> absl::Status {
    if (!std::isfinite(e) || e <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(field(), ": ", e, " GeV must be > 0"));
    }
    if (!Inside(e, e_lo, e_hi)) {
      return absl::InvalidArgumentError(absl::StrCat(field(), ": ", e,
                                                     " GeV is outside the model's training range ",
                                                     e_lo, "..", e_hi, " GeV"));
    }
    return absl::OkStatus();
  };
  auto check_theta = [&](double t, const auto& field) -> absl::Status {
    if (!std::isfinite(t) || !Inside(t, t_lo, t_hi)) {
      return absl::InvalidArgumentError(absl::StrCat(field(), ": ", t,
                                                     " rad is outside the model's training range ",
                                                     t_lo, "..", t_hi, " rad"));
    }
    return absl::OkStatus();
  };

  // Both ends of a requested range, min first.
  auto check_ends = [](const v1::Range& range, absl::string_view field,
                       const auto& check) -> absl::Status {
    if (absl::Status s = check(range.min(), [&] { return absl::StrCat(field, ".min"); }); !s.ok()) {
      return s;
    }
    return check(range.max(), [&] { return absl::StrCat(field, ".max"); });
  };

  if (r.has_list()) {
    const auto& items = r.list().items();
    if (items.empty()) return absl::InvalidArgumentError("request.list: no conditions");
    if (items.size() > kMaxShowers) {
      return absl::InvalidArgumentError(absl::StrCat("request.list: more than ", kMaxShowers));
    }
    plan.count_ = items.size();
    plan.energies_.reserve(items.size());
    for (int i = 0; i < items.size(); ++i) {
      auto field = [i](absl::string_view leaf) {
        return [i, leaf] { return absl::StrCat("request.list.items[", i, "].", leaf); };
      };
      if (absl::Status s = check_energy(items[i].energy_gev(), field("energy_gev")); !s.ok()) {
        return s;
      }
      plan.energies_.push_back(static_cast<float>(items[i].energy_gev()));
      if (traits.variable_angle) {
        double t = items[i].theta_rad();
        if (t == 0) t = 0.5 * (t_lo + t_hi);
        if (absl::Status s = check_theta(t, field("theta_rad")); !s.ok()) return s;
        plan.thetas_.push_back(static_cast<float>(t));
      }
    }
    return plan;
  }
  if (!r.has_range()) {
    return absl::InvalidArgumentError("request: give conditions (list or range)");
  }
  const v1::ConditionRange& range = r.range();
  if (range.count() < 1 || range.count() > kMaxShowers) {
    return absl::InvalidArgumentError(
        absl::StrCat("request.range.count: ", range.count(), " is outside 1..", kMaxShowers));
  }
  plan.count_ = range.count();
  if (!range.has_energy_gev() || range.energy_gev().min() > range.energy_gev().max()) {
    return absl::InvalidArgumentError("request.range.energy_gev: needs min <= max");
  }
  if (absl::Status s = check_ends(range.energy_gev(), "request.range.energy_gev", check_energy);
      !s.ok()) {
    return s;
  }
  plan.energy_min_ = range.energy_gev().min();
  plan.energy_max_ = range.energy_gev().max();
  if (traits.variable_angle) {
    plan.theta_min_ = t_lo;
    plan.theta_max_ = t_hi;
    if (range.has_theta_rad()) {
      if (range.theta_rad().min() > range.theta_rad().max()) {
        return absl::InvalidArgumentError("request.range.theta_rad: needs min <= max");
      }
      if (absl::Status s = check_ends(range.theta_rad(), "request.range.theta_rad", check_theta);
          !s.ok()) {
        return s;
      }
      plan.theta_min_ = range.theta_rad().min();
      plan.theta_max_ = range.theta_rad().max();
    }
  }
  return plan;
}

ShowerSpec GenerationPlan::Shower(int64_t index) const {
  ShowerSpec s;
  s.seed = seed_;
  s.index = index;
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
