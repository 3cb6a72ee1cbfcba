#include "workers/gan/device.h"

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>
#include <stdlib.h>
#include <torch/cuda.h>
#include <torch/optim/rmsprop.h>
#include <torch/version.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/gpu_ids.h"
#include "workers/gan/checkpoint.h"

namespace gantry::gan {
namespace {

void MoveOptimizerState(torch::optim::RMSprop& optimizer, const c10::Device& device) {
  auto move = [&device](const at::Tensor& t) { return t.defined() ? t.to(device) : t; };
  for (auto& [key, state] : optimizer.state()) {
    auto* s = dynamic_cast<torch::optim::RMSpropParamState*>(state.get());
    if (s == nullptr) continue;
    s->square_avg(move(s->square_avg()));
    s->momentum_buffer(move(s->momentum_buffer()));
    s->grad_avg(move(s->grad_avg()));
  }
}

}  // namespace

absl::StatusOr<c10::Device> ParseDevice(absl::string_view text, absl::string_view field) {
  if (text.empty() || text == "cpu") return c10::Device(c10::kCPU);
  int index = -1;
  if (absl::ConsumePrefix(&text, "cuda:") && absl::SimpleAtoi(text, &index) && index >= 0 &&
      index <= kMaxGpuId && !absl::StartsWith(text, "+") && !absl::StartsWith(text, " ")) {
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(index));
  }
  return absl::InvalidArgumentError(absl::StrCat(field, ": \"", text.substr(0, 40),
                                                 "\" is not a device; use cpu or cuda:N (N = 0..",
                                                 kMaxGpuId, ")"));
}

std::string DeviceName(const c10::Device& device) {
  if (device.is_cpu()) return "cpu";
  return absl::StrCat(c10::DeviceTypeName(device.type(), /*lower_case=*/true), ":",
                      device.has_index() ? device.index() : 0);
}

absl::Status DeviceUsable(const c10::Device& device) {
  if (device.is_cpu()) return absl::OkStatus();
  if (!device.is_cuda()) {
    return absl::FailedPreconditionError(
        absl::StrCat(DeviceName(device), ": only cpu and cuda devices are supported"));
  }
  if (!at::hasCUDA()) {
    return absl::FailedPreconditionError(absl::StrCat(
        DeviceName(device),
        ": this LibTorch has no CUDA (a CPU build, or no CUDA driver on this machine); run on cpu "
        "or use a gantry-worker built with GANTRY_WITH_CUDA=ON against a CUDA LibTorch"));
  }
  const int64_t count = static_cast<int64_t>(torch::cuda::device_count());
  const int64_t index = device.has_index() ? device.index() : 0;
  if (index >= count) {
    return absl::FailedPreconditionError(
        absl::StrCat(DeviceName(device), ": this machine has ", count, " CUDA device(s)"));
  }
  return absl::OkStatus();
}

absl::Status MakeCurrentDevice(const c10::Device& device) {
  if (device.is_cpu()) return absl::OkStatus();
  try {
    c10::impl::getDeviceGuardImpl(device.type())->setDevice(device);
  } catch (const c10::Error& e) {
    return absl::FailedPreconditionError(
        absl::StrCat(DeviceName(device), ": cannot select it: ", e.what_without_backtrace()));
  }
  return absl::OkStatus();
}

// LibTorch 2.4 made autocast's switches per device type; 1.13 (the CPU build's) has CUDA-only ones.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define GANTRY_AUTOCAST_PER_DEVICE_TYPE 1
#endif

Bf16AutocastGuard::Bf16AutocastGuard(bool on) : on_(on) {
  if (!on_) return;
#ifdef GANTRY_AUTOCAST_PER_DEVICE_TYPE
  previous_enabled_ = at::autocast::is_autocast_enabled(at::kCUDA);
  previous_dtype_ = at::autocast::get_autocast_dtype(at::kCUDA);
  at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  at::autocast::set_autocast_enabled(at::kCUDA, true);
#else
  previous_enabled_ = at::autocast::is_enabled();
  previous_dtype_ = at::autocast::get_autocast_gpu_dtype();
  at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
  at::autocast::set_enabled(true);
#endif
  at::autocast::increment_nesting();
}

Bf16AutocastGuard::~Bf16AutocastGuard() {
  if (!on_) return;
  // The cast copies of the parameters live until the outermost guard ends.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#ifdef GANTRY_AUTOCAST_PER_DEVICE_TYPE
  at::autocast::set_autocast_enabled(at::kCUDA, previous_enabled_);
  at::autocast::set_autocast_dtype(at::kCUDA, previous_dtype_);
#else
  at::autocast::set_enabled(previous_enabled_);
  at::autocast::set_autocast_gpu_dtype(previous_dtype_);
#endif
}

void UseDeterministicAlgorithms() {
  setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
  at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  at::globalContext().setDeterministicCuDNN(true);
  at::globalContext().setBenchmarkCuDNN(false);
}

void MoveTrainingState(TrainingState& state, const c10::Device& device) {
  state.generator->to(device);
  state.discriminator->to(device);
  if (state.generator_optimizer) MoveOptimizerState(*state.generator_optimizer, device);
  if (state.discriminator_optimizer) MoveOptimizerState(*state.discriminator_optimizer, device);
}

}  // namespace gantry::gan
