#include "server/requests/generation_requests.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_details.h"
#include "base/status_macros.h"

namespace gantry::server {
namespace {

namespace v1 = ::gantry::v1;

using checks::CheckFinite;
using checks::CheckInt;
using checks::CheckParticle;
using checks::Invalid;

// The per-call cap: one place for both kinds of conditions.
absl::Status CheckShowersPerRequest(absl::string_view field, int64_t requested,
                                    int64_t max_showers) {
  if (max_showers <= 0 || requested <= max_showers) return absl::OkStatus();
  return SetErrorReason(
      absl::ResourceExhaustedError(absl::StrCat(
          field, ": ", requested, " showers requested; the maximum is ", max_showers,
          " per request (limit max_showers_per_request). Split it into calls of at most ",
          max_showers,
          " showers, or ask an admin to raise the limit: for you with gantry admin "
          "tenants limits set TENANT --max-showers-per-request N, for every tenant with "
          "gantry-server --max-showers-per-request")),
      "QUOTA_EXCEEDED",
      {{"limit", "max_showers_per_request"},
       {"value", absl::StrCat(max_showers)},
       {"in_use", absl::StrCat(requested)}});
}

}  // namespace

absl::Status ValidateGenerateRequest(const v1::GenerateRequest& request, int64_t max_showers) {
  RETURN_IF_ERROR(ParseModelRef(request.model(), "model").status());
  switch (request.conditions_case()) {
    case v1::GenerateRequest::kList: {
      const auto& items = request.list().items();
      if (items.empty()) return Invalid("list.items", "is empty; give at least one condition");
      RETURN_IF_ERROR(CheckShowersPerRequest("list.items", items.size(), max_showers));
      for (int i = 0; i < items.size(); ++i) {
        const std::string e = absl::StrCat("list.items[", i, "].energy_gev");
        RETURN_IF_ERROR(CheckFinite(items[i].energy_gev(), e));
        if (items[i].energy_gev() <= 0) {
          return Invalid(e,
                         absl::StrCat("is ", items[i].energy_gev(), "; energies must be > 0 GeV"));
        }
        const std::string t = absl::StrCat("list.items[", i, "].theta_rad");
        RETURN_IF_ERROR(CheckFinite(items[i].theta_rad(), t));
        if (items[i].theta_rad() < 0 || items[i].theta_rad() > M_PI) {
          return Invalid(t,
                         absl::StrCat("is ", items[i].theta_rad(), "; angles must be in [0, pi]"));
        }
      }
      break;
    }
    case v1::GenerateRequest::kRange: {
      const v1::ConditionRange& r = request.range();
      if (!r.has_energy_gev()) return Invalid("range.energy_gev", "is missing; give min and max");
      RETURN_IF_ERROR(CheckFinite(r.energy_gev().min(), "range.energy_gev.min"));
      RETURN_IF_ERROR(CheckFinite(r.energy_gev().max(), "range.energy_gev.max"));
      if (r.energy_gev().min() <= 0) return Invalid("range.energy_gev.min", "must be > 0 GeV");
      if (r.energy_gev().max() < r.energy_gev().min()) {
        return Invalid("range.energy_gev", "max is below min");
      }
      if (r.has_theta_rad()) {
        RETURN_IF_ERROR(CheckFinite(r.theta_rad().min(), "range.theta_rad.min"));
        RETURN_IF_ERROR(CheckFinite(r.theta_rad().max(), "range.theta_rad.max"));
        if (r.theta_rad().min() < 0 || r.theta_rad().max() > M_PI ||
            r.theta_rad().max() < r.theta_rad().min()) {
          return Invalid("range.theta_rad", "must satisfy 0 <= min <= max <= pi");
        }
      }
      if (r.count() <= 0) {
        return Invalid(
            "range.count",
            max_showers > 0
                ? absl::StrCat("is ", r.count(), "; ask for 1..", max_showers, " showers")
                : absl::StrCat("is ", r.count(), "; ask for at least 1 shower"));
      }
      RETURN_IF_ERROR(CheckShowersPerRequest("range.count", r.count(), max_showers));
      break;
    }
    default:
      return Invalid("conditions", "are missing; set either list or range");
  }
  RETURN_IF_ERROR(CheckParticle(request.particle(), "particle"));
  if (!v1::Precision_IsValid(request.precision())) {
    return Invalid("precision", "is not a known Precision; use FP32 or BF16");
  }
  RETURN_IF_ERROR(CheckInt(request.priority(), 0, kMaxPriority, "priority"));
  return CheckInt(request.chunk_showers(), 0, kMaxChunkShowers, "chunk_showers");
}

absl::Status ValidateGenerateForModel(const v1::GenerateRequest& request,
                                      const v1::ModelVersion& model) {
  const std::string ref = absl::StrCat(model.name(), ":", model.version());
  if (model.status() == v1::MODEL_STATUS_ARCHIVED) {
    return absl::FailedPreconditionError(
        absl::StrCat("model: ", ref, " is archived; generate from a ready version"));
  }
  if (request.precision() == v1::PRECISION_BF16 &&
      model.bf16().state() == v1::Bf16Check::STATE_UNAVAILABLE) {
    return absl::FailedPreconditionError(absl::StrCat("precision: BF16 is unavailable for ", ref,
                                                      ": ", model.bf16().reason(),
                                                      "; use PRECISION_FP32"));
  }
  if (request.particle() != v1::PARTICLE_UNSPECIFIED &&
      model.particle() != v1::PARTICLE_UNSPECIFIED && request.particle() != model.particle()) {
    return Invalid("particle",
                   absl::StrCat("is ", v1::Particle_Name(request.particle()), " but ", ref,
                                " was trained on ", v1::Particle_Name(model.particle())));
  }
  const bool has_e = model.has_energy_range_gev() && model.energy_range_gev().max() > 0;
  const bool has_t = model.has_theta_range_rad() && model.theta_range_rad().max() > 0;
  const double emin = model.energy_range_gev().min(), emax = model.energy_range_gev().max();
  const double tmin = model.theta_range_rad().min(), tmax = model.theta_range_rad().max();
  auto energy_error = [&](absl::string_view field, double e) {
    return Invalid(field, absl::StrCat(e, " GeV is outside the training range of ", ref, " [", emin,
                                       ", ", emax, "] GeV"));
  };
  auto theta_error = [&](absl::string_view field, double t) {
    return Invalid(field, absl::StrCat(t, " rad is outside the training range of ", ref, " [", tmin,
                                       ", ", tmax, "] rad"));
  };
  if (request.has_list()) {
    for (int i = 0; i < request.list().items_size(); ++i) {
      const v1::Condition& c = request.list().items(i);
      if (has_e && (c.energy_gev() < emin || c.energy_gev() > emax)) {
        return energy_error(absl::StrCat("list.items[", i, "].energy_gev"), c.energy_gev());
      }
      if (has_t && c.theta_rad() != 0 && (c.theta_rad() < tmin || c.theta_rad() > tmax)) {
        return theta_error(absl::StrCat("list.items[", i, "].theta_rad"), c.theta_rad());
      }
    }
  } else {
    const v1::ConditionRange& r = request.range();
    if (has_e && r.energy_gev().min() < emin) {
      return energy_error("range.energy_gev.min", r.energy_gev().min());
    }
    if (has_e && r.energy_gev().max() > emax) {
      return energy_error("range.energy_gev.max", r.energy_gev().max());
    }
    if (has_t && r.has_theta_rad() && r.theta_rad().min() < tmin) {
      return theta_error("range.theta_rad.min", r.theta_rad().min());
    }
    if (has_t && r.has_theta_rad() && r.theta_rad().max() > tmax) {
      return theta_error("range.theta_rad.max", r.theta_rad().max());
    }
  }
  return absl::OkStatus();
}

}  // namespace gantry::server
