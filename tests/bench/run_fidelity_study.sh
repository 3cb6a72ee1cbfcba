#!/usr/bin/env bash
# The fidelity study: does a generator trained by gantry approach the Monte Carlo? Through the whole
# service (private PostgreSQL, gantry-server, worker daemons, the registry), on one machine:
#   1. trains the study's recipe on toy Monte Carlo (a training job with a checkpoint, hence a
#      validation point, every CHECKPOINT_STEPS steps), registers the model;
#   2. prints the validation curve the registry stored, and the registered metrics against the targets;
#   3. generates SHOWERS showers through the service and validates them with gantry-validate against
#      an independent toy-MC sample of the same size (another seed): the larger-sample check;
#   4. with PLOTS_DIR set, writes the version's plots there (gantry models plots).
# usage: tests/bench/run_fidelity_study.sh        (build dir: GANTRY_BENCH_BUILD, default ./build)
# Env (defaults = the recipe of record, docs/MODELS.md "Fidelity"):
#   PRESET EVENTS DATA_SEED EPOCHS BATCH LR LR_DECAY_TO SEED WORLD_SIZE THREADS CHECKPOINT_STEPS SHOWERS
#   LATENT LOSS_WEIGHTS HOLDOUT (fraction of EVENTS held out for the registered validation)
#   PORT_BASE: listen only on ports from here (server PORT_BASE, worker w serves on PORT_BASE + w and
#   its rendezvous ports are PORT_BASE + 50 w ... + 49); unset: server and serving on ephemeral ports,
#   rendezvous from 30050
#   PLOTS_DIR, STACK_KEEP=1 (keep the scratch folder and its logs), JSON_OUT (the summary as JSON)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/stack.sh"
stack_init "${GANTRY_BENCH_BUILD:-$stack_root/build}"

preset="${PRESET:-tiny-template}"
events="${EVENTS:-5000}"
data_seed="${DATA_SEED:-11}"
epochs="${EPOCHS:-2}"
batch="${BATCH:-16}"
lr="${LR:-0.0003}"                  # 0 = the preset's
lr_decay_to="${LR_DECAY_TO:-0.1}"
seed="${SEED:-1}"
world_size="${WORLD_SIZE:-1}"
threads="${THREADS:-1}"
checkpoint_steps="${CHECKPOINT_STEPS:-150}"
showers="${SHOWERS:-2000}"
latent="${LATENT:-0}"                       # 0 = the preset's
loss_weights="${LOSS_WEIGHTS:-}"            # adversarial,energy,ecal_sum; empty = the preset's
holdout="${HOLDOUT:-0.2}"
port_base="${PORT_BASE:-}"
dataset="toymc:layout=25,events=$events,seed=$data_seed,emin=10,emax=200"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)," \
     "load $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ -n "$port_base" ]]; then export STACK_SERVER_PORT="$port_base"; fi
stack_start_server
stack_tenant physics
for ((w = 1; w <= world_size; ++w)); do
  if [[ -n "$port_base" ]]; then
    stack_start_worker "study-worker-$w" "$threads" $((port_base + 50 * w)) --serve-port $((port_base + w))
  else
    stack_start_worker "study-worker-$w" "$threads" $((30000 + 50 * w))
  fi
done
stack_wait_workers "$world_size"

weights_json=""
if [[ -n "$loss_weights" ]]; then
  IFS=, read -r w_adv w_energy w_ecal <<<"$loss_weights"
  weights_json=", \"lossWeights\": {\"adversarial\": $w_adv, \"energy\": $w_energy, \"ecalSum\": $w_ecal}"
fi
cat >"$stack_work/spec.json" <<JSON
{
  "displayName": "fidelity-study",
  "modelPreset": "$preset",
  "modelOverrides": {"latentSize": $latent},
  "dataset": "$dataset",
  "worldSize": $world_size,
  "resourcesPerRank": {"threads": $threads},
  "hyperParameters": {"epochs": $epochs, "batchPerRank": $batch, "learningRate": $lr,
                      "lrDecayTo": $lr_decay_to, "seed": "$seed"$weights_json},
  "checkpointPolicy": {"everySteps": $checkpoint_steps, "keepLast": 2, "keepBest": true},
  "validation": {"holdoutFraction": $holdout},
  "modelName": "fidelity-$preset"
}
JSON
echo "spec: $(tr -d '\n ' <"$stack_work/spec.json")"
t0="$(date +%s)"
job="$(gantry jobs submit --spec "$stack_work/spec.json" --json | json_field id)"
echo "job $job submitted at $(date -u +%H:%M:%S) UTC"
gantry jobs watch "$job" >"$stack_work/watch.log" 2>&1 || { tail -40 "$stack_work/watch.log"; exit 1; }
t1="$(date +%s)"
model="$(gantry jobs get "$job" --json | json_field modelRef)"
[[ -n "$model" ]] || { tail -40 "$stack_work/watch.log"; echo "no model registered" >&2; exit 1; }
echo "RESULT training wall time $((t1 - t0)) s (submit to registered), model $model"

echo "== the validation curve and the registered metrics"
gantry jobs get "$job"
gantry models get "$model" --json >"$stack_work/model.json"
gantry jobs get "$job" --json >"$stack_work/job.json"
points="$(/usr/bin/python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1])).get("validationCurve", [])))' \
  "$stack_work/job.json")"
expected_points=$((checkpoint_steps > 0 ? 2 : 1))
echo "RESULT validation curve: $points points"
[[ "$points" -ge "$expected_points" ]] || { echo "expected at least $expected_points validation points" >&2; exit 1; }

echo "== $showers showers through the service against $showers independent toy-MC showers"
gantry generate "$model" --energy 10:200 --count "$showers" --seed 7 --out "$stack_work/generated.h5"
"$stack_bin/showers/gantry-toymc" "toymc:layout=25,events=$showers,seed=$((data_seed + 1000)),emin=10,emax=200" \
  "$stack_work/reference.h5" >/dev/null
"$stack_bin/workers/physics/gantry-validate" --summary --json="$stack_work/independent.json" \
  "$stack_work/reference.h5" "$stack_work/generated.h5"

if [[ -n "${PLOTS_DIR:-}" ]]; then
  gantry models plots "$model" --out "$PLOTS_DIR" --force
fi

# The study's targets, on the registered (held-out) metrics and on the independent sample.
/usr/bin/python3 - "$stack_work/model.json" "$stack_work/independent.json" "${JSON_OUT:-}" <<'PY'
import json, sys
registered = json.load(open(sys.argv[1])).get("metrics", {})
independent = json.load(open(sys.argv[2])).get("metrics", {})
targets = [  # metric, limit as a number or as a multiple of the metric's null
    ("sf_relative_error_max", 0.05, None),
    ("shower_max_relative_error", 0.03, None),
    ("centroid_depth_relative_error", 0.03, None),
    ("eprof_longitudinal", None, 2.0),
    ("eprof_transverse", None, 2.0),
]
summary = {}
for label, metrics in (("registered (held-out MC)", registered), ("independent sample", independent)):
    rows = []
    for name, limit, null_multiple in targets:
        value = metrics.get(name)
        null = metrics.get(name + "_null")
        bound = limit if limit is not None else (null_multiple * null if null is not None else None)
        met = value is not None and bound is not None and value <= bound
        rows.append({"metric": name, "value": value, "null": null, "limit": bound, "met": met})
        print(f"TARGET {label}: {name} = {value:.4f} (null {null if null is None else round(null, 4)}) "
              f"limit {bound:.4f}: {'met' if met else 'MISSED'}" if value is not None and bound is not None
              else f"TARGET {label}: {name} missing")
    summary[label] = rows
print("RESULT targets met: %d of %d (registered), %d of %d (independent)" % (
    sum(r["met"] for r in summary["registered (held-out MC)"]), len(targets),
    sum(r["met"] for r in summary["independent sample"]), len(targets)))
if sys.argv[3]:
    json.dump(summary, open(sys.argv[3], "w"), indent=1)
PY
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
