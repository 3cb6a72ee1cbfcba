#!/usr/bin/env bash
# The device checks, one command, on a machine with an NVIDIA GPU, CUDA and a CUDA PyTorch and none
# of gantry's other dependencies (tests/gpu/prepare.sh, run beforehand on the build machine, unpacks
# Abseil and OpenSSL into var/gpu-prefix; carry it). From the repository root:
#   tests/gpu/run.sh            build gpu_check against that PyTorch's LibTorch, run it on cuda:0,
#                               then the same networks in that PyTorch, side by side
#   tests/gpu/run.sh --cpu      the same on a CPU (checks this script and the program; no figures)
# Writes everything it prints to $OUT/gpu-check.txt (OUT defaults to var/gpu-out) and exits non-zero
# when a check failed. Figures go to docs/BENCHMARKS.md "GPU" by hand, with the machine named.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
cpu=0
[[ "${1:-}" == --cpu ]] && cpu=1
out="${OUT:-$PWD/var/gpu-out}"
mkdir -p "$out"
exec > >(tee "$out/gpu-check.txt") 2>&1
prefix="${GANTRY_GPU_PREFIX:-$PWD/var/gpu-prefix}"
[[ -d "$prefix/usr/include/absl" ]] ||
  { echo "no Abseil in $prefix: run tests/gpu/prepare.sh on the build machine and carry var/gpu-prefix"; exit 2; }
python="${PYTHON:-python3}"
echo "== $(date -u +%FT%TZ) $(uname -n)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())'

# LibTorch of that PyTorch; NCCL's header from its nvidia-nccl wheel; Gloo's headers if it has them.
torch_cmake="$("$python" -c 'import torch.utils; print(torch.utils.cmake_prefix_path)')"
torch_include="$("$python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "include"))')"
extra="$prefix/usr/include/x86_64-linux-gnu"
# The nvidia wheels' layout differs between CUDA majors (nvidia/nccl, nvidia/cu13): look for it.
site="$("$python" -c 'import os, torch; print(os.path.dirname(os.path.dirname(torch.__file__)))')"
nccl_h="$(find "$site/nvidia" -name nccl.h -path "*include*" 2>/dev/null | head -1 || true)"
[[ -n "$nccl_h" ]] && extra="$extra;$(dirname "$nccl_h")"
echo "nccl.h: ${nccl_h:-not found}"
gloo=""
[[ -f "$torch_include/gloo/algorithm.h" ]] && gloo="$torch_include"
suffix=""
[[ $cpu == 1 ]] && suffix=-cpu
build="${GANTRY_GPU_BUILD_DIR:-$PWD/var/gpu-build$suffix}"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
configure() {
  rm -rf "$build"
  cmake -S tests/gpu -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$torch_cmake;$prefix/usr" -DOPENSSL_ROOT_DIR="$prefix/usr" \
    -DGANTRY_EXTRA_INCLUDES="$extra" -DGANTRY_GLOO_INCLUDE_DIR="$gloo" \
    -DGANTRY_WITH_CUDA="$([[ $cpu == 1 ]] && echo OFF || echo ON)" -DCMAKE_CXX_STANDARD="$1" >/dev/null
}
start=$SECONDS
# C++17 as gantry, unless that LibTorch's headers demand C++20 (newer ones #error below it).
standard=17
if [[ -n "${GANTRY_GPU_CXX_STANDARD:-}" ]]; then
  standard="$GANTRY_GPU_CXX_STANDARD"
elif grep -qs "C++20 or later" "$torch_include/ATen/ATen.h" "$torch_include/torch/all.h" \
  "$torch_include/c10/macros/Macros.h" "$torch_include/c10/util/C++17.h"; then
  standard=20
fi
echo "== C++$standard"
keep_going=()
[[ ${#generator[@]} -gt 0 ]] && keep_going=(-- -k 0)  # every compile error in one run
if ! configure "$standard"; then
  find "$build" -name CMakeError.log -exec tail -40 {} \; 2>/dev/null
  exit 3
fi
if ! cmake --build "$build" -j "$(nproc)" "${keep_going[@]}" >"$out/build.log" 2>&1; then
  if [[ $standard == 17 ]] && grep -q "C++20" "$out/build.log"; then
    echo "== the headers ask for C++20: building again"
    configure 20 && cmake --build "$build" -j "$(nproc)" "${keep_going[@]}" >"$out/build.log" 2>&1 ||
      { grep -E "error:|undefined reference|Error [0-9]" "$out/build.log" | head -80; exit 3; }
  else
    grep -E "error:|undefined reference|Error [0-9]" "$out/build.log" | head -80
    exit 3
  fi
fi
echo "== built gpu_check in $((SECONDS - start)) s"

# Abseil and OpenSSL from the carried prefix (the build's rpath names the system's first).
export LD_LIBRARY_PATH="$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
status=0
if [[ $cpu == 1 ]]; then
  "$build/gpu_check" --device=cpu --quick || status=$?
  echo "== exit $status"
  exit "$status"
fi
# GANTRY_GPU_CHECK_ARGS: more flags for gpu_check (--skip-generation: checks and training only).
# shellcheck disable=SC2086
timeout 330 "$build/gpu_check" --device=cuda:0 ${GANTRY_GPU_CHECK_ARGS:-} || status=$?

# The same networks in that PyTorch: eager and torch.compile, FP32 and BF16, one process per
# variant (one import, one compilation per shape), each bounded so that the whole run ends by
# GANTRY_GPU_DEADLINE_S (default 470 s after the start; 0 runs none of them); what did not run is
# said.
deadline="${GANTRY_GPU_DEADLINE_S:-470}"
bounded() {  # bounded <seconds at most> <label> command...
  local most="$1" label="$2" left=$((deadline - SECONDS))
  shift 2
  if ((left < 15)); then echo "RESULT $label NOT RUN (deadline)"; return; fi
  timeout "$((left < most ? left : most))" "$@" || echo "RESULT $label FAILED or ran out of time"
}
echo "== PyTorch side by side ($((deadline - SECONDS)) s left)"
bench=tests/bench/pytorch_3dgan.py
bounded 60 floors "$python" tests/gpu/device_floors.py --device cuda
bounded 60 "train 3dgan-25" "$python" "$bench" train --device cuda --preset 3dgan-25 --batch 128 \
  --iters 20 --warmup 3
for variant in eager autocast-bf16 compile-bf16 compile; do
  bounded 90 "generate 3dgan-25 $variant" "$python" "$bench" generate --device cuda \
    --preset 3dgan-25 --batch 128,1024,4096 --iters 20 --warmup 3 --variant "$variant"
done
echo "== exit $status"
exit "$status"
