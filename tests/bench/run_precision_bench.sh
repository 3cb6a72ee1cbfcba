#!/usr/bin/env bash
# Generation speed by precision, in one run, alternating so that every variant sees the same machine
# load: gantry FP32, gantry BF16 (gan_generation_bench, the network at batch 128), plain PyTorch
# eager FP32, TorchScript (traced, frozen, optimize_for_inference) FP32 and eager under bf16 CPU
# autocast (pytorch_3dgan.py), then the machine's float32/bfloat16 peak (compute_peak_bench).
#   tests/bench/run_precision_bench.sh [build-dir]   (default: $GANTRY_BUILD_DIR or ./build)
# Env: THREADS (2), BATCH (128), ROUNDS (3), ITERS (10), PYTHON (/usr/bin/python3).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${1:-${GANTRY_BUILD_DIR:-$here/../../build}}"
threads="${THREADS:-2}"
batch="${BATCH:-128}"
rounds="${ROUNDS:-3}"
iters="${ITERS:-10}"
python="${PYTHON:-/usr/bin/python3}"
gen_bin="$(find "$build" -name gan_generation_bench -type f -perm -u+x | head -1)"
peak_bin="$(find "$build" -name compute_peak_bench -type f -perm -u+x | head -1)"
if [[ -z "$gen_bin" || -z "$peak_bin" ]]; then
  echo "build gan_generation_bench and compute_peak_bench in $build first" >&2
  exit 1
fi
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
     "bf16 flags: $(grep -m1 -o 'avx512_bf16\|amx_bf16' /proc/cpuinfo | sort -u | xargs)," \
     "load $(cut -d' ' -f1-3 /proc/loadavg)"
field() { awk '/^RESULT generate /{print $4}'; }
variants=(gantry-fp32 gantry-bf16 pytorch-eager pytorch-script pytorch-autocast-bf16)
run() {
  case "$1" in
    gantry-fp32) "$gen_bin" --batch="$batch" --threads="$threads" --iters="$iters" --precision=fp32 ;;
    gantry-bf16) "$gen_bin" --batch="$batch" --threads="$threads" --iters="$iters" --precision=bf16 ;;
    pytorch-eager) "$python" "$here/pytorch_3dgan.py" generate --batch "$batch" --threads "$threads" \
                     --iters "$iters" --variant eager ;;
    pytorch-script) "$python" "$here/pytorch_3dgan.py" generate --batch "$batch" --threads "$threads" \
                      --iters "$iters" --variant script ;;
    pytorch-autocast-bf16) "$python" "$here/pytorch_3dgan.py" generate --batch "$batch" \
                             --threads "$threads" --iters "$iters" --variant autocast-bf16 ;;
  esac | field
}
declare -A results
for ((r = 1; r <= rounds; ++r)); do
  line="round $r:"
  for v in "${variants[@]}"; do
    ms="$(run "$v")"
    results[$v]+="$ms "
    line+=" $v $ms"
  done
  echo "$line ms/shower"
done
best() { printf '%s\n' ${results[$1]} | sort -g | head -1; }
median() { printf '%s\n' ${results[$1]} | sort -g | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}'; }
for v in "${variants[@]}"; do
  echo "RESULT $v best $(best "$v") median $(median "$v") ms/shower (3dgan-25, batch $batch, $threads threads)"
done
ratio() { awk -v a="$(median "$1")" -v b="$(median "$2")" 'BEGIN{printf "%.2f", a/b}'; }
echo "RATIO pytorch-autocast-bf16 / gantry-bf16 (medians): $(ratio pytorch-autocast-bf16 gantry-bf16)x (target >= 2)"
echo "RATIO pytorch-eager / gantry-fp32 (medians): $(ratio pytorch-eager gantry-fp32)x (target >= 3)"
echo "RATIO pytorch-script / gantry-fp32 (medians): $(ratio pytorch-script gantry-fp32)x"
echo "RATIO gantry-fp32 / gantry-bf16 (medians): $(ratio gantry-fp32 gantry-bf16)x"
"$peak_bin" --threads="$threads"
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
