// The GPU ids gantry accepts, in one place: a worker's --device=gpu:ID list, its registration's
// device_ids and a rank's --device=cuda:N all take 0..kMaxGpuId (c10's device index is a byte).
#ifndef GANTRY_BASE_GPU_IDS_H_
#define GANTRY_BASE_GPU_IDS_H_

namespace gantry {

inline constexpr int kMaxGpuId = 127;

}  // namespace gantry

#endif  // GANTRY_BASE_GPU_IDS_H_
