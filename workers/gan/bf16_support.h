// Bf16Support: whether this worker can compute the generator in bfloat16 at native speed.
#ifndef GANTRY_WORKERS_GAN_BF16_SUPPORT_H_
#define GANTRY_WORKERS_GAN_BF16_SUPPORT_H_

#include "absl/status/status.h"

namespace gantry::gan {

// The environment variable that makes Bf16Support() answer as on a CPU without bfloat16
// instructions (value "1"): lets tests and operators exercise the refusal path on any machine.
inline constexpr char kPretendNoBf16Env[] = "GANTRY_PRETEND_NO_BF16";

// Where the generator runs.
enum class Bf16Device { kCpu, kGpu };

// OK when generation may run in bfloat16 on that device: on the CPU, the processor has AVX512-BF16
// or AMX-BF16 (CPUID) and LibTorch's oneDNN can run bfloat16 kernels; on a GPU (GANTRY_WITH_CUDA
// builds), the current CUDA device supports bfloat16 (compute capability 8.0+). Otherwise
// FAILED_PRECONDITION saying what is missing and to use PRECISION_FP32. Each hardware answer is
// computed once; the environment override is read on every call. Thread-safe.
absl::Status Bf16Support(Bf16Device device = Bf16Device::kCpu);

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_BF16_SUPPORT_H_
