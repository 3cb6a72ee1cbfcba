#!/usr/bin/env bash
# One training recipe probed on the field-standard metrics without the service: `gantry-worker
# local-train` of the field study's data and schedule (tiny-template, 4,000 toy-MC showers at
# 10-200 GeV of data seed 11, 2 epochs of 250 steps of batch 16, lr 3e-4 decaying to 0.1 of it,
# one thread), 2,000 showers from `local-generate`, `gantry-validate` against the validation Monte
# Carlo (seeds 101/102; never the sealed test seeds). For choosing a recipe; the figures of record
# come from run_field_study.sh with SEALED=1.
#   tests/bench/recipe_probe.sh NAME 'MODEL_SET' [extra local-train flags]
#   e.g. recipe_probe.sh spots 'generator_spots=1'
# Env: GANTRY_BUILD_DIR (./build), OUT_DIR (.), SEED (1: the training seed), EPOCHS (2; an epoch is
# the data's 250 batches), PRESET (tiny-template), NICE (5), CLASSIFIER_SEEDS (3).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin="${GANTRY_BUILD_DIR:-$here/../../build}"
worker="$bin/workers/app/gantry-worker"
[[ $# -ge 2 ]] || { sed -n 2,12p "${BASH_SOURCE[0]}" >&2; exit 2; }
[[ -x "$worker" ]] || { echo "build gantry-worker first ($worker)" >&2; exit 1; }
name="$1" model_set="$2"
shift 2
out="${OUT_DIR:-.}"
mkdir -p "$out"
run() { nice -n "${NICE:-5}" "$@"; }
for s in 101 102; do
  [[ -f "$out/mc-$s.h5" ]] ||
    run "$bin/showers/gantry-toymc" "toymc:layout=25,events=2000,seed=$s,emin=10,emax=200" \
      "$out/mc-$s.h5" >/dev/null
done
t0="$(date +%s)"
run "$worker" local-train --preset="${PRESET:-tiny-template}" \
  --data=toymc:layout=25,events=4000,seed=11,emin=10,emax=200 --epochs="${EPOCHS:-2}" \
  --batch=16 --lr=0.0003 --lr-decay-to=0.1 \
  --seed="${SEED:-1}" --threads=1 ${model_set:+--model-set="$model_set"} \
  --out="$out/$name.ckpt" "$@" >"$out/$name.train.log"
grep -i "fitted\|^epoch" "$out/$name.train.log" | tail -3
echo "trained in $(( $(date +%s) - t0 )) s"
run "$worker" local-generate --checkpoint="$out/$name.ckpt" --energy-range=10:200 --count=2000 \
  --seed=7 --threads=1 --out="$out/$name.h5" >/dev/null
run "$bin/workers/physics/gantry-validate" "$out/mc-101.h5" "$out/$name.h5" \
  --floor-reference="$out/mc-102.h5" --classifier-seeds="${CLASSIFIER_SEEDS:-3}" \
  --json="$out/$name.json" >"$out/$name.txt"
grep -E "auc_features|auc_cells|^ *fpd|sep_mean|sep_layer_width_x|sep_sampling_fraction|nonzero_cells_ratio|spread_ratio|^ *fom" \
  "$out/$name.txt" | grep -v "_floor\|_spread " || cat "$out/$name.txt"
