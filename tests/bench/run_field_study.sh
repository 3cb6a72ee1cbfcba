#!/usr/bin/env bash
# The field study: the trained generator against the no-network baselines and the Monte Carlo floor,
# on the field-standard metrics (docs/MODELS.md "Field-standard metrics"), through the whole service
# (private PostgreSQL, gantry-server, WORKERS worker daemons, the registry, Generate):
#   1. trains the generator recipe once per training seed (SEEDS) and fits each baseline preset
#      (BASELINES) on the same toy-MC training data, all registered as models;
#   2. generates SHOWERS showers from every model through the service;
#   3. validates each with gantry-validate against a validation MC sample, with a second,
#      independent MC sample for the floors (VALIDATION_SEEDS): every choice of recipe is made on
#      these;
#   4. with SEALED=1 only, validates the same showers against the sealed test samples (TEST_SEEDS),
#      which give the final figures and are never used for choices;
#   5. prints one table (generator seeds, their worst, baselines, MC floor) and writes it as JSON;
#   6. with LEAVE_OUT="centre half_width" (GeV), every model trains without that band
#      (spec.validation.leave_out) and steps 2-5 are repeated in the band and in a trained control
#      band of the same width half a width above it, on MC samples of each band's energies.
#      Each model's own left_out_* validation metrics are printed too.
# usage: tests/bench/run_field_study.sh        (build dir: GANTRY_BENCH_BUILD, default ./build)
# Env (defaults = the recipe of record, docs/MODELS.md "Fidelity"):
#   PRESET EVENTS DATA_SEED EPOCHS BATCH LR LR_DECAY_TO LATENT THREADS HOLDOUT SEEDS (" ": baselines
#   only) BASELINES
#   SHOWERS WORKERS HARD (1: the hard toy MC, for training and every reference) CLASSIFIER_SEEDS
#   VALIDATION_SEEDS ("reference floor") TEST_SEEDS SEALED OUT_DIR (keeps the samples and reports)
#   LEAVE_OUT ("centre half_width" in GeV; empty = train on every energy)
#   BEST_METRIC (a validation metric, e.g. auc_features: the generators validate the start and a
#   checkpoint every CHECKPOINT_STEPS steps on their hold-out and register the one it scores
#   lowest, checkpoint_policy.register_best; empty = the last checkpoint) CHECKPOINT_STEPS (50)
#   PORT_BASE (worker w rendezvous on PORT_BASE + 50 w ... + 49; default 31000) JSON_OUT STACK_KEEP REQUIRE_ALL (1: fail unless every report has every metric of the table)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/stack.sh"
stack_init "${GANTRY_BENCH_BUILD:-$stack_root/build}"

preset="${PRESET:-tiny-spots}"
events="${EVENTS:-5000}"
data_seed="${DATA_SEED:-11}"
epochs="${EPOCHS:-2}"
batch="${BATCH:-16}"
lr="${LR:-0.0003}"
lr_decay_to="${LR_DECAY_TO:-0.1}"
latent="${LATENT:-0}"
threads="${THREADS:-1}"
holdout="${HOLDOUT:-0.2}"
seeds="${SEEDS:-1 2 3}"
baselines="${BASELINES:-baseline-template baseline-spots baseline-spots-smeared}"
showers="${SHOWERS:-2000}"
workers="${WORKERS:-2}"
hard="${HARD:-0}"
classifier_seeds="${CLASSIFIER_SEEDS:-3}"
read -r validation_ref validation_floor <<<"${VALIDATION_SEEDS:-101 102}"
read -r test_ref test_floor <<<"${TEST_SEEDS:-901 902}"
sealed="${SEALED:-0}"
best_metric="${BEST_METRIC:-}"
checkpoint_steps="${CHECKPOINT_STEPS:-50}"
out_dir="${OUT_DIR:-$stack_work/out}"
mkdir -p "$out_dir"
read -r leave_centre leave_half <<<"${LEAVE_OUT:-}"
leave_out_json=""
if [[ -n "${leave_centre:-}" ]]; then
  leave_out_json=", \"leaveOut\": {\"centreGev\": $leave_centre, \"halfWidthGev\": $leave_half}"
fi
# toy EVENTS SEED [EMIN EMAX]
toy() {
  echo "toymc:layout=25,events=$1,seed=$2,emin=${3:-10},emax=${4:-200}$([[ "$hard" == 1 ]] && echo ",hard=1")"
}
dataset="$(toy "$events" "$data_seed")"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
     "load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "training data: $dataset; validation MC seeds $validation_ref/$validation_floor;" \
     "sealed test MC seeds $test_ref/$test_floor ($([[ "$sealed" == 1 ]] && echo used || echo not used))"
stack_start_server
stack_tenant physics
for ((w = 1; w <= workers; ++w)); do
  stack_start_worker "field-worker-$w" "$threads" $((${PORT_BASE:-31000} + 50 * w))
done
stack_wait_workers "$workers"

# One job per generator seed and per baseline; all queue at once, WORKERS of them train at a time.
submit() {  # name preset seed
  local policy='"checkpointPolicy": {"everySteps": 0, "keepLast": 1},'
  if [[ -n "$best_metric" && "$2" != baseline-* ]]; then
    policy="\"checkpointPolicy\": {\"everySteps\": $checkpoint_steps, \"keepLast\": 1, \"keepBest\": true,
                        \"bestMetric\": \"$best_metric\", \"registerBest\": true},"
  fi
  cat >"$stack_work/$1.json" <<JSON
{
  "displayName": "$1",
  "modelPreset": "$2",
  "modelOverrides": {"latentSize": $latent},
  "dataset": "$dataset",
  "worldSize": 1,
  "resourcesPerRank": {"threads": $threads},
  "hyperParameters": {"epochs": $epochs, "batchPerRank": $batch, "learningRate": $lr,
                      "lrDecayTo": $lr_decay_to, "seed": "$3"},
  $policy
  "validation": {"holdoutFraction": $holdout$leave_out_json},
  "modelName": "$1"
}
JSON
  gantry jobs submit --spec "$stack_work/$1.json" --json | json_field id
}
declare -A jobs
names=()
for seed in $seeds; do names+=("gen-s$seed"); jobs["gen-s$seed"]="$(submit "field-$preset-s$seed" "$preset" "$seed")"; done
for b in $baselines; do names+=("$b"); jobs["$b"]="$(submit "field-$b" "$b" 1)"; done
t0="$(date +%s)"
declare -A models
# The hold-out's validation curve and the checkpoint register_best chose from it (the lowest,
# ties to the newest; with REQUIRE_ALL=1 anything else fails the study).
read -r -d '' chosen_py <<'PY' || true
import json, sys
job_path, model_path, metric, name, require = sys.argv[1:6]
curve = json.load(open(job_path)).get("validationCurve", [])
scored = [(int(p.get("step", 0)), p["metrics"][metric]) for p in curve if metric in p["metrics"]]
step = int(json.load(open(model_path)).get("lineage", {}).get("checkpointStep", 0))
print(f"RESULT {name}: hold-out {metric} by step: "
      + ", ".join(f"{s}: {v:.4g}" for s, v in scored) + f"; registered step {step}")
if require == "1":
    best = min(scored, key=lambda sv: (sv[1], -sv[0]))[0] if scored else None
    if best is None or step != best:
        sys.exit(f"{name}: registered step {step}, but the curve's lowest {metric} is at {best}")
PY
for name in "${names[@]}"; do
  gantry jobs watch "${jobs[$name]}" >"$stack_work/$name.watch.log" 2>&1 || {
    tail -30 "$stack_work/$name.watch.log"; echo "job $name failed" >&2; exit 1; }
  models[$name]="$(gantry jobs get "${jobs[$name]}" --json | json_field modelRef)"
  echo "RESULT $name: model ${models[$name]}, $(( $(date +%s) - t0 )) s after the first submit"
  if [[ -n "$best_metric" && "$name" != baseline-* ]]; then
    gantry jobs get "${jobs[$name]}" --json >"$out_dir/$name.job.json"
    gantry models get "${models[$name]}" --json >"$out_dir/$name.model.json"
    /usr/bin/python3 -c "$chosen_py" "$out_dir/$name.job.json" "$out_dir/$name.model.json" \
      "$best_metric" "$name" "${REQUIRE_ALL:-0}"
  fi
done

echo "== the Monte Carlo samples"
for s in "$validation_ref" "$validation_floor" $([[ "$sealed" == 1 ]] && echo "$test_ref $test_floor"); do
  "$stack_bin/showers/gantry-toymc" "$(toy "$showers" "$s")" "$out_dir/mc-$s.h5" >/dev/null
done

validate() {  # name sample.h5 ref floor
  "$stack_bin/workers/physics/gantry-validate" "$out_dir/mc-$3.h5" "$2" \
    --floor-reference="$out_dir/mc-$4.h5" --classifier-seeds="$classifier_seeds" \
    --json="$out_dir/$1-$3.json" >"$out_dir/$1-$3.txt"
}
echo "== $showers showers from every model, validated"
for name in "${names[@]}"; do
  gantry generate "${models[$name]}" --energy 10:200 --count "$showers" --seed 7 --out "$out_dir/$name.h5" >/dev/null
  validate "$name" "$out_dir/$name.h5" "$validation_ref" "$validation_floor"
  [[ "$sealed" == 1 ]] && validate "$name" "$out_dir/$name.h5" "$test_ref" "$test_floor"
done

samples="$validation_ref$([[ "$sealed" == 1 ]] && echo " $test_ref")"
/usr/bin/python3 "$stack_root/tests/bench/field_study_table.py" --out-dir "$out_dir" \
  --names "${names[*]}" --samples "$samples" \
  --json "${JSON_OUT:-$out_dir/field_study.json}" $([[ "${REQUIRE_ALL:-0}" == 1 ]] && echo --require)

if [[ -n "${leave_centre:-}" ]]; then
  # The same models and MC seeds, in the left-out band and in its control band only.
  band_lo="$(awk "BEGIN{print $leave_centre - $leave_half}")"
  band_hi="$(awk "BEGIN{print $leave_centre + $leave_half}")"
  control_lo="$(awk "BEGIN{print $leave_centre + 2 * $leave_half}")"
  control_hi="$(awk "BEGIN{print $leave_centre + 4 * $leave_half}")"
  for band in "left-out $band_lo $band_hi" "control $control_lo $control_hi"; do
    read -r label lo hi <<<"$band"
    echo "== $label band $lo-$hi GeV: $showers showers from every model and from the MC there"
    mkdir -p "$out_dir/$label"
    pairs=("$validation_ref $validation_floor")
    [[ "$sealed" == 1 ]] && pairs+=("$test_ref $test_floor")
    for pair in "${pairs[@]}"; do
      for s in $pair; do
        "$stack_bin/showers/gantry-toymc" "$(toy "$showers" "$s" "$lo" "$hi")" \
          "$out_dir/$label/mc-$s.h5" >/dev/null
      done
    done
    for name in "${names[@]}"; do
      gantry generate "${models[$name]}" --energy "$lo:$hi" --count "$showers" --seed 7 \
        --out "$out_dir/$label/$name.h5" >/dev/null
      for pair in "${pairs[@]}"; do
        read -r ref floor <<<"$pair"
        "$stack_bin/workers/physics/gantry-validate" "$out_dir/$label/mc-$ref.h5" \
          "$out_dir/$label/$name.h5" --floor-reference="$out_dir/$label/mc-$floor.h5" \
          --classifier-seeds="$classifier_seeds" --json="$out_dir/$label/$name-$ref.json" \
          >"$out_dir/$label/$name-$ref.txt"
      done
    done
    echo "### $label band, $lo-$hi GeV"
    /usr/bin/python3 "$stack_root/tests/bench/field_study_table.py" --out-dir "$out_dir/$label" \
      --names "${names[*]}" --samples "$samples" --json "$out_dir/$label/field_study.json"
  done
  echo "== each model's own validation of the bands (held-out events)"
  for name in "${names[@]}"; do
    gantry models get "${models[$name]}" --json | /usr/bin/python3 -c '
import json, sys
m = json.load(sys.stdin).get("metrics", {})
keys = ["fom", "fom_null", "mre_sampling_fraction", "auc_features", "sep_mean", "holdout_events"]
f = lambda p: ", ".join(f"{k} {m[p + k]:.4g}" for k in keys if p + k in m)
band, control = f("left_out_"), f("left_out_control_")
print(f"RESULT {sys.argv[1]}: left-out band: {band}; control: {control}")
' "$name"
  done
fi
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
