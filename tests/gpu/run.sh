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
nccl="$("$python" -c 'import os, nvidia.nccl as n; print(os.path.join(list(n.__path__)[0], "include"))' 2>/dev/null || true)"
[[ -n "$nccl" && -f "$nccl/nccl.h" ]] && extra="$extra;$nccl"
gloo=""
[[ -f "$torch_include/gloo/algorithm.h" ]] && gloo="$torch_include"
build="${GANTRY_GPU_BUILD_DIR:-$PWD/var/gpu-build$([[ $cpu == 1 ]] && echo -cpu)}"
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
# C++17 as gantry; a LibTorch that asks for a newer standard gets it.
if ! { configure 17 && cmake --build "$build" -j "$(nproc)"; }; then
  echo "== the C++17 build failed; trying C++20"
  configure 20 && cmake --build "$build" -j "$(nproc)"
fi
echo "== built gpu_check in $((SECONDS - start)) s"

status=0
if [[ $cpu == 1 ]]; then
  "$build/gpu_check" --device=cpu --quick || status=$?
  echo "== exit $status"
  exit "$status"
fi
"$build/gpu_check" --device=cuda:0 || status=$?

# The same networks in that PyTorch: eager and torch.compile, FP32 and BF16.
echo "== PyTorch side by side"
bench=tests/bench/pytorch_3dgan.py
for variant in eager compile autocast-bf16 compile-bf16; do
  for batch in 128 512 1024 2048 4096; do
    "$python" "$bench" generate --device cuda --preset 3dgan-25 --batch "$batch" --iters 20 \
      --warmup 3 --variant "$variant" || echo "RESULT generate 3dgan-25 batch $batch $variant FAILED"
  done
done
"$python" "$bench" train --device cuda --preset 3dgan-25 --batch 128 --iters 20 --warmup 3 ||
  echo "RESULT train 3dgan-25 FAILED"
echo "== exit $status"
exit "$status"
