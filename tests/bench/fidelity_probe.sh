#!/usr/bin/env bash
# A short training probe of a recipe with `gantry-worker local-train`, in chunks: after every chunk it
# generates 200 showers and prints where they put their energy across the face (shower_stats.py), so
# one run shows when a structure forms (docs/studies/2026-11-28-fidelity-averages.md).
#   tests/bench/fidelity_probe.sh NAME 'MODEL_SET' CHUNKS STEPS_PER_CHUNK [extra local-train flags]
#   e.g. fidelity_probe.sh base 'latent=128;loss_weights=6,0.1,0.4' 6 50
# Env: GANTRY_BUILD_DIR (./build), OUT_DIR (.), LR (0.0003), NICE (5), START (1: first chunk; a later
# START resumes NAME-(START-1).ckpt). Data: 1,000 toy-MC showers at 10-200 GeV, batch 16, one thread.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
worker="${GANTRY_BUILD_DIR:-$here/../../build}/workers/app/gantry-worker"
[[ $# -ge 4 ]] || { sed -n 2,8p "${BASH_SOURCE[0]}" >&2; exit 2; }
[[ -x "$worker" ]] || { echo "build gantry-worker first ($worker)" >&2; exit 1; }
name="$1" model_set="$2" chunks="$3" steps="$4"
shift 4
out="${OUT_DIR:-.}"
start="${START:-1}"
resume=()
[[ "$start" -gt 1 ]] && resume=(--resume="$out/$name-$((start - 1)).ckpt")
for ((c = start; c <= chunks; ++c)); do
  nice -n "${NICE:-5}" "$worker" local-train --preset=tiny \
    --data=toymc:layout=25,events=1000,seed=1,emin=10,emax=200 --epochs="$c" \
    --steps-per-epoch="$steps" --batch=16 --threads=1 --lr="${LR:-0.0003}" \
    --model-set="$model_set" "${resume[@]}" --out="$out/$name-$c.ckpt" "$@" | grep '^epoch' | tail -1
  resume=(--resume="$out/$name-$c.ckpt")
  nice -n "${NICE:-5}" "$worker" local-generate --checkpoint="$out/$name-$c.ckpt" \
    --energy-range=10:200 --count=200 --seed=3 --threads=1 --out="$out/$name-$c.h5" >/dev/null
  echo "after $((c * steps)) steps:"
  /usr/bin/python3 "$here/shower_stats.py" "$out/$name-$c.h5"
done
