#include "workers/gan/bf16_support.h"

#include <ATen/Context.h>
#include <cpuid.h>

#include <cstdlib>
#include <cstring>

#ifdef GANTRY_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <torch/cuda.h>
#endif

namespace gantry::gan {
namespace {

constexpr char kNoHardware[] = "this worker's CPU lacks AVX512-BF16/AMX; use PRECISION_FP32";

// CPUID leaf 7: sub-leaf 1 EAX bit 5 is AVX512_BF16, sub-leaf 0 EDX bit 22 is AMX-BF16. The OS
// must also save the wide registers (XCR0 bits 5-7 for AVX-512 state).
bool CpuHasBf16() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_max(0, nullptr) < 7) return false;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & (1u << 27))) return false;  // OSXSAVE
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool avx512_state = (xcr0_lo & 0xe6u) == 0xe6u;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  const bool amx_bf16 = (edx & (1u << 22)) != 0;
  const unsigned max_subleaf = eax;
  bool avx512_bf16 = false;
  if (max_subleaf >= 1) {
    __cpuid_count(7, 1, eax, ebx, ecx, edx);
    avx512_bf16 = (eax & (1u << 5)) != 0;
  }
  return (avx512_bf16 && avx512_state) || amx_bf16;
}

absl::Status GpuSupport() {
#ifdef GANTRY_WITH_CUDA
  // Built only against a CUDA LibTorch (tests/gpu checks it on a GPU).
  if (!torch::cuda::is_available()) {
    return absl::FailedPreconditionError(
        "this worker has no usable CUDA device; use PRECISION_FP32");
  }
  if (at::cuda::getCurrentDeviceProperties()->major >= 8) return absl::OkStatus();
  return absl::FailedPreconditionError(
      "this worker's GPU lacks bfloat16 support (compute capability 8.0+); use PRECISION_FP32");
#else
  return absl::FailedPreconditionError(
      "this gantry-worker was built without CUDA (GANTRY_WITH_CUDA); use PRECISION_FP32");
#endif
}

absl::Status CpuSupport() {
  if (!CpuHasBf16()) return absl::FailedPreconditionError(kNoHardware);
  if (!at::hasMKLDNN()) {
    return absl::FailedPreconditionError(
        "this worker's LibTorch was built without oneDNN (no bfloat16 kernels); use "
        "PRECISION_FP32");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Bf16Support(Bf16Device device) {
  const char* pretend = std::getenv(kPretendNoBf16Env);
  if (pretend != nullptr && std::strcmp(pretend, "1") == 0) {
    return absl::FailedPreconditionError(kNoHardware);
  }
  if (device == Bf16Device::kGpu) {
    static const absl::Status* const gpu = new absl::Status(GpuSupport());
    return *gpu;
  }
  static const absl::Status* const cpu = new absl::Status(CpuSupport());
  return *cpu;
}

}  // namespace gantry::gan
