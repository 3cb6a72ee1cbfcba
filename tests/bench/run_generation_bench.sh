#!/usr/bin/env bash
# Generation service benchmark, all in one run on this machine:
#   1. starts a private PostgreSQL, gantry-server and one gantry-worker daemon (serving on);
#   2. registers a 3dgan-25 model through the public API: a one-epoch training job on 16 toy
#      showers (the weights are as good as untrained: fine for speed, the network is the same);
#   3. measures the same generator in-process (gan_generation_bench, batch 128, 2 threads);
#   4. runs generation_service_bench against the stack (bulk 10,000 showers, 64 concurrent
#      1-shower clients, single shower at idle) with the in-process figure as baseline;
#   5. repeats 3-4 ROUNDS times (default 1), measures in-process once more (a drifting machine
#      shows up) and stops everything.
# usage: tests/bench/run_generation_bench.sh [generation_service_bench flags...]
#   PRECISION=bf16 runs both the in-process and the service figures in bfloat16 (default fp32).
#   GANTRY_BENCH_BUILD=build dir with gantry-server, gantry-worker, gantry, gan_generation_bench
#   and generation_service_bench (default: build-client).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib/stack.sh"
stack_init "${GANTRY_BENCH_BUILD:-$stack_root/build-client}"
bin="$stack_bin"
work="$stack_work"

echo "machine: $(nproc) cores, $(. /etc/os-release && echo "$PRETTY_NAME"), $(uname -r)"
echo "compilers running now: $(ps aux | grep -c '[c]c1plus'), load average: $(cut -d' ' -f1-3 /proc/loadavg)"

stack_start_server
server="$GANTRY_SERVER"
stack_tenant bench
stack_start_worker bench-worker 2 29900
stack_wait_workers 1

echo "registering a 3dgan-25 model (one epoch on 16 toy showers)"
job="$(gantry jobs submit --name bench-25 --preset 3dgan-25 \
  --dataset "toymc:layout=25,events=16,seed=1,emin=10,emax=200" --epochs 1 --batch 8 \
  --world-size 1 --threads 2 --model-name bench-25 --no-validation --json | json_field id)"
gantry jobs watch "$job" >"$work/watch.log" 2>&1 || { cat "$work/watch.log"; exit 1; }
model="$(gantry jobs get "$job" --json | json_field modelRef)"
[[ -n "$model" ]] || { cat "$work/watch.log"; echo "no model registered" >&2; exit 1; }
echo "model: $model"

in_process() {
  "$bin/tests/bench/gan_generation_bench" --preset=3dgan-25 --batch=128 --threads=2 --iters=10 \
    --precision="${PRECISION:-fp32}" |
    tee -a "$work/in_process.log" | sed -n 's/^RESULT generate-end-to-end 3dgan-25 \([0-9.e+-]*\) .*/\1/p'
}
# CPU seconds (user + system) a process has used so far.
cpu_of() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.2f", ($14 + $15) / hz}' "/proc/$1/stat"; }
server_pid="${stack_pids[0]}"
worker_pid="${stack_pids[1]}"
# Rounds alternate the in-process generator and the service so that both see the same machine;
# each service figure is divided by the in-process figure of its own round.
rounds="${ROUNDS:-1}"
for round in $(seq 1 "$rounds"); do
  ip="$(in_process)"
  echo "RESULT round $round in-process batch 128: $ip ms/shower ($(/usr/bin/python3 -c "print(round(1000/$ip, 1))") showers/s)"
  # One mode at a time, with the CPU each process of the stack spent on it (where the time goes).
  for mode in ${GANTRY_BENCH_MODES:-single bulk concurrent}; do
    s0="$(cpu_of "$server_pid")"; w0="$(cpu_of "$worker_pid")"; t0="$(date +%s.%N)"
    "$bin/tests/bench/generation_service_bench" --server="$server" --token="$GANTRY_TOKEN" \
      --model="$model" --baseline-ms="$ip" --mode="$mode" --precision="${PRECISION:-fp32}" "$@" | sed "s/^RESULT /RESULT round $round /"
    s1="$(cpu_of "$server_pid")"; w1="$(cpu_of "$worker_pid")"; t1="$(date +%s.%N)"
    /usr/bin/python3 -c "print('CPU round $round %s: %.1f s wall (incl. warm-up), gantry-server %.2f s, gantry-worker %.2f s' % ('$mode', $t1 - $t0, $s1 - $s0, $w1 - $w0))"
  done
done
ip="$(in_process)"
echo "RESULT after in-process batch 128: $ip ms/shower ($(/usr/bin/python3 -c "print(round(1000/$ip, 1))") showers/s)"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
