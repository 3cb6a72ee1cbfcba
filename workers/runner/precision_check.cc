#include "workers/runner/precision_check.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "workers/gan/bf16_support.h"

namespace gantry::runner {
namespace {

namespace v1 = ::gantry::v1;

constexpr const char* kGuardedMetrics[] = {"sf_mre", "eprof", "pos"};

// The value of `key`, NaN when absent.
double Get(const std::map<std::string, double>& metrics, const std::string& key) {
  auto it = metrics.find(key);
  return it == metrics.end() ? std::nan("") : it->second;
}

v1::Bf16Check Check(v1::Bf16Check::State state, std::string reason) {
  v1::Bf16Check check;
  check.set_state(state);
  check.set_reason(std::move(reason));
  return check;
}

}  // namespace

v1::Bf16Check PrecisionCheck::Decide(const std::map<std::string, double>& fp32,
                                     const std::map<std::string, double>& bf16) {
  std::string passed;
  for (const char* metric : kGuardedMetrics) {
    const double a = Get(fp32, metric);
    const double b = Get(bf16, metric);
    const double null_a = Get(fp32, absl::StrCat(metric, "_null"));
    const double null_b = Get(bf16, absl::StrCat(metric, "_null"));
    if (!std::isfinite(a) || !std::isfinite(null_a)) continue;  // nothing to compare with
    if (!std::isfinite(b)) {
      return Check(v1::Bf16Check::STATE_UNAVAILABLE,
                   absl::StrFormat("%s is %g in BF16 against %.3g in FP32", metric, b, a));
    }
    const double null = std::isfinite(null_b) ? std::max(null_a, null_b) : null_a;
    const double diff = std::abs(b - a);
    if (diff > null) {
      return Check(v1::Bf16Check::STATE_UNAVAILABLE,
                   absl::StrFormat("%s is %.3g in BF16 against %.3g in FP32: the difference %.3g "
                                   "exceeds the statistical null %.3g",
                                   metric, b, a, diff, null));
    }
    absl::StrAppend(&passed, passed.empty() ? "" : ", ",
                    absl::StrFormat("%s %.3g vs %.3g (null %.3g)", metric, b, a, null));
  }
  if (passed.empty()) {
    return Check(v1::Bf16Check::STATE_NOT_CHECKED,
                 "the validation gave no finite sf_mre, eprof or pos metric to compare");
  }
  return Check(v1::Bf16Check::STATE_AVAILABLE, absl::StrCat("BF16 vs FP32: ", passed));
}

v1::Bf16Check PrecisionCheck::Run(const gan::ModelConfig& config, const gan::Generator& generator,
                                  const showers::ShowerSet& reference, const Fp32Validation& fp32) {
  gan::ShowerGenerator runner(config, generator);
  if (absl::Status hardware = runner.bf16_support(); !hardware.ok()) {
    return Check(v1::Bf16Check::STATE_NOT_CHECKED, std::string(hardware.message()));
  }
  gan::GenerationRequest request = fp32.request;
  request.precision = gan::GenerationPrecision::kBFloat16;
  absl::StatusOr<showers::ShowerSet> generated = runner.Generate(request);
  if (!generated.ok()) {
    return Check(v1::Bf16Check::STATE_UNAVAILABLE,
                 absl::StrCat("BF16 generation failed: ", generated.status().message()));
  }
  generated->particle = reference.particle;
  absl::StatusOr<physics::ValidationReport> report =
      physics::ValidateShowers(reference, *generated, fp32.options);
  if (!report.ok()) {
    return Check(
        v1::Bf16Check::STATE_NOT_CHECKED,
        absl::StrCat("the BF16 sample could not be validated: ", report.status().message()));
  }
  return Decide(fp32.metrics, report->metrics);
}

}  // namespace gantry::runner
