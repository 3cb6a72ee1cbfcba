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
#   5. prints one table (generator seeds, their worst, baselines, MC floor) and writes it as JSON.
# usage: tests/bench/run_field_study.sh        (build dir: GANTRY_BENCH_BUILD, default ./build)
# Env (defaults = the recipe of record, docs/MODELS.md "Fidelity"):
#   PRESET EVENTS DATA_SEED EPOCHS BATCH LR LR_DECAY_TO LATENT THREADS HOLDOUT SEEDS BASELINES
#   SHOWERS WORKERS HARD (1: the hard toy MC, for training and every reference) CLASSIFIER_SEEDS
#   VALIDATION_SEEDS ("reference floor") TEST_SEEDS SEALED OUT_DIR (keeps the samples and reports)
#   PORT_BASE (worker w rendezvous on PORT_BASE + 50 w ... + 49; default 31000) JSON_OUT STACK_KEEP REQUIRE_ALL (1: fail unless every report has every metric of the table)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/stack.sh"
stack_init "${GANTRY_BENCH_BUILD:-$stack_root/build}"

preset="${PRESET:-tiny-template}"
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
baselines="${BASELINES:-baseline-template baseline-spots}"
showers="${SHOWERS:-2000}"
workers="${WORKERS:-2}"
hard="${HARD:-0}"
classifier_seeds="${CLASSIFIER_SEEDS:-3}"
read -r validation_ref validation_floor <<<"${VALIDATION_SEEDS:-101 102}"
read -r test_ref test_floor <<<"${TEST_SEEDS:-901 902}"
sealed="${SEALED:-0}"
out_dir="${OUT_DIR:-$stack_work/out}"
mkdir -p "$out_dir"
toy() { echo "toymc:layout=25,events=$1,seed=$2,emin=10,emax=200$([[ "$hard" == 1 ]] && echo ",hard=1")"; }
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
  "checkpointPolicy": {"everySteps": 0, "keepLast": 1},
  "validation": {"holdoutFraction": $holdout},
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
for name in "${names[@]}"; do
  gantry jobs watch "${jobs[$name]}" >"$stack_work/$name.watch.log" 2>&1 || {
    tail -30 "$stack_work/$name.watch.log"; echo "job $name failed" >&2; exit 1; }
  models[$name]="$(gantry jobs get "${jobs[$name]}" --json | json_field modelRef)"
  echo "RESULT $name: model ${models[$name]}, $(( $(date +%s) - t0 )) s after the first submit"
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

/usr/bin/python3 "$stack_root/tests/bench/field_study_table.py" --out-dir "$out_dir" \
  --names "${names[*]}" --samples "$validation_ref$([[ "$sealed" == 1 ]] && echo " $test_ref")" \
  --json "${JSON_OUT:-$out_dir/field_study.json}" $([[ "${REQUIRE_ALL:-0}" == 1 ]] && echo --require)
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
