// Devices of a rank and of a serving model: which one ("cpu", "cuda:N"), whether this build and
// machine can use it, and moving a training state onto it.
//
// The device policy: models, optimiser state, batches and the generator's input live on the
// device; the random draws of training (epoch order, conditions, noise, label flips) come from the
// training state's CPU generator and are copied over (a few hundred kilobytes per step), so a step
// on a GPU sees the very numbers a step on the CPU sees and a checkpoint keeps one RNG state.
// Dropout masks on a GPU come from a generator on that device, reseeded every step from the shared
// CPU stream. Checkpoints are read onto the CPU whatever device wrote them (ReadCheckpoint), then
// moved: a job resumes on either.
#ifndef GANTRY_WORKERS_GAN_DEVICE_H_
#define GANTRY_WORKERS_GAN_DEVICE_H_

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gantry::gan {

struct TrainingState;  // workers/gan/checkpoint.h

// "cpu" (also "") or "cuda:N" (N a device index, 0..127). INVALID_ARGUMENT naming `field`
// otherwise. Only the spelling is checked; DeviceUsable says whether it can run here.
absl::StatusOr<c10::Device> ParseDevice(absl::string_view text, absl::string_view field = "device");

// OK for the CPU; for cuda:N, OK when this LibTorch was built with CUDA and the machine has
// device N. FAILED_PRECONDITION otherwise, saying what is missing.
absl::Status DeviceUsable(const c10::Device& device);

// The device's name as ParseDevice reads it ("cpu", "cuda:0").
std::string DeviceName(const c10::Device& device);

// Makes a cuda device the process's current one (NCCL and kernels launched without an explicit
// device use it); nothing for the CPU. Call after DeviceUsable said OK.
absl::Status MakeCurrentDevice(const c10::Device& device);

// The deterministic mode of a GPU run (process-wide; call before the first CUDA work): ATen's
// deterministic algorithms (an operator without one fails rather than run nondeterministically),
// deterministic cuDNN without autotuning, and a fixed cuBLAS workspace (CUBLAS_WORKSPACE_CONFIG
// =:4096:8, unless already set). Then a run repeats bit for bit on the same GPU model, driver and
// LibTorch; not across GPU models, and never equal to a CPU run. On the CPU training is
// deterministic already; this changes nothing there.
void UseDeterministicAlgorithms();

// While alive, CUDA operators on this thread run under bfloat16 autocast (convolutions and matrix
// products in bfloat16, reductions and losses in float32; the parameters, their gradients and the
// optimiser state stay float32); `on` = false does nothing. Nests; restores the previous setting.
// CPU operators are not affected. Backward passes run outside it (autograd keeps the forward's
// dtypes).
class Bf16AutocastGuard {
 public:
  explicit Bf16AutocastGuard(bool on);
  ~Bf16AutocastGuard();
  Bf16AutocastGuard(const Bf16AutocastGuard&) = delete;
  Bf16AutocastGuard& operator=(const Bf16AutocastGuard&) = delete;

 private:
  bool on_;
  bool previous_enabled_ = false;
  at::ScalarType previous_dtype_ = at::kHalf;
};

// Moves both networks (parameters and buffers) and both optimisers' state to `device`, in place
// (the optimisers keep their parameters). A no-op when they are there already.
void MoveTrainingState(TrainingState& state, const c10::Device& device);

}  // namespace gantry::gan

#endif  // GANTRY_WORKERS_GAN_DEVICE_H_
