// PrecisionCheck: the BF16 physics guard run before a model version is registered. The final
// validation's sample is generated again in bfloat16 from the same latent inputs and conditions and
// compared with the same Monte Carlo; BF16 generation is available for the version only when its
// metrics agree with the float32 sample's within their statistical null.
#ifndef GANTRY_WORKERS_RUNNER_PRECISION_CHECK_H_
#define GANTRY_WORKERS_RUNNER_PRECISION_CHECK_H_

#include <map>
#include <string>

#include "gantry/v1/common.pb.h"
#include "showers/shower_set.h"
#include "workers/gan/generator.h"
#include "jobspec/model_config.h"
#include "workers/gan/shower_generator.h"
#include "workers/physics/validation.h"

namespace gantry::runner {

// Stateless; thread-safe as long as the generator is not used by another thread meanwhile.
class PrecisionCheck {
 public:
  // What the float32 validation ran and measured: its conditions and seed, its options, and its
  // ValidationReport::metrics (keys sf_mre, eprof, pos and their "_null").
  struct Fp32Validation {
    gan::GenerationRequest request;
    physics::ValidationOptions options;
    std::map<std::string, double> metrics;
  };

  // The decision. For each metric M of sf_mre, eprof and pos (the mean relative error of the
  // sampling fraction, the longitudinal/transverse profile distance and the position moments
  // distance, all against the Monte Carlo): BF16 passes M when
  //   |M_bf16 - M_fp32| <= max(M_null_fp32, M_null_bf16),
  // M_null being the value M takes for two independent samples of the same distribution (the
  // statistical floor ValidateShowers estimates). The two samples share their latent inputs, so the
  // difference is the rounding of bfloat16 alone; it must not be larger than sampling noise.
  // AVAILABLE when every metric with a finite FP32 value passes; UNAVAILABLE naming the first
  // failing metric (also when BF16's value is not finite where FP32's is); NOT_CHECKED when no
  // metric has a finite FP32 value and null.
  static gantry::v1::Bf16Check Decide(const std::map<std::string, double>& fp32,
                                      const std::map<std::string, double>& bf16);

  // Generates fp32.request in bfloat16 with `generator`, validates it against `reference` with
  // fp32.options, then Decide. NOT_CHECKED with the reason when this worker cannot compute in
  // bfloat16 (gan::Bf16Support) or the BF16 sample cannot be validated; UNAVAILABLE when bfloat16
  // generation itself fails.
  static gantry::v1::Bf16Check Run(const gan::ModelConfig& config, const gan::Generator& generator,
                                   const showers::ShowerSet& reference, const Fp32Validation& fp32);
};

}  // namespace gantry::runner

#endif  // GANTRY_WORKERS_RUNNER_PRECISION_CHECK_H_
