#!/usr/bin/env bash
# Runs the LibTorch 3DGAN benchmarks and the plain PyTorch (eager) script side by side, alternating
# them (A B A B) so both see the same machine load, and prints the ratios.
#   tests/bench/run_gan_bench.sh [build-dir]     (default: $GANTRY_BUILD_DIR or ./build)
# Env: THREADS (2), GEN_BATCH (128), TRAIN_BATCH (64), ROUNDS (2), PYTHON (/usr/bin/python3).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${1:-${GANTRY_BUILD_DIR:-$here/../../build}}"
threads="${THREADS:-2}"
gen_batch="${GEN_BATCH:-128}"
train_batch="${TRAIN_BATCH:-64}"
rounds="${ROUNDS:-2}"
python="${PYTHON:-/usr/bin/python3}"
gen_bin="$(find "$build" -name gan_generation_bench -type f -perm -u+x | head -1)"
train_bin="$(find "$build" -name gan_training_bench -type f -perm -u+x | head -1)"
if [[ -z "$gen_bin" || -z "$train_bin" ]]; then
  echo "build gan_generation_bench and gan_training_bench in $build first" >&2
  exit 1
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "blas: $(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3)"
field() { awk '/^RESULT '"$1"' /{print $4}'; }
best_min() { sort -g | head -1; }
best_max() { sort -g | tail -1; }
gen_cpp=(); gen_py=(); train_cpp=(); train_py=()
for ((r = 1; r <= rounds; ++r)); do
  gen_cpp+=("$("$gen_bin" --batch="$gen_batch" --threads="$threads" --iters=10 | field generate)")
  gen_py+=("$("$python" "$here/pytorch_3dgan.py" generate --batch "$gen_batch" --threads "$threads" --iters 10 | field generate)")
  train_cpp+=("$("$train_bin" --batch="$train_batch" --threads="$threads" --iters=3 | field train)")
  train_py+=("$("$python" "$here/pytorch_3dgan.py" train --batch "$train_batch" --threads "$threads" --iters 3 | field train)")
  echo "round $r: generate libtorch ${gen_cpp[-1]} ms/shower, pytorch ${gen_py[-1]} ms/shower;" \
       "train libtorch ${train_cpp[-1]} samples/s, pytorch ${train_py[-1]} samples/s"
done
gc="$(printf '%s\n' "${gen_cpp[@]}" | best_min)"; gp="$(printf '%s\n' "${gen_py[@]}" | best_min)"
tc="$(printf '%s\n' "${train_cpp[@]}" | best_max)"; tp="$(printf '%s\n' "${train_py[@]}" | best_max)"
echo "best of $rounds: generation 3dgan-25 batch $gen_batch, $threads threads: libtorch $gc ms/shower," \
     "pytorch eager $gp ms/shower, speed-up $(awk -v a="$gp" -v b="$gc" 'BEGIN{printf "%.2f", a/b}')x (target 1.5x)"
echo "best of $rounds: training 3dgan-25 batch $train_batch, $threads threads: libtorch $tc samples/s," \
     "pytorch eager $tp samples/s, ratio $(awk -v a="$tc" -v b="$tp" 'BEGIN{printf "%.2f", a/b}')x (target 2x)"
