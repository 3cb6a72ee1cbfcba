#!/usr/bin/env bash
# Generation service benchmark (issue 5), all in one run on this machine:
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
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="${GANTRY_BENCH_BUILD:-$root/build-client}"
work="$(mktemp -d /tmp/gantry-genbench-XXXXXX)"
chmod 755 "$work"
export GANTRY_PG_DIR="$work/pg"

pids=()
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  "$root/deploy/local/pg.sh" stop || true
  [[ $rc -eq 0 ]] && rm -rf "$work" || echo "logs kept in $work" >&2
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "machine: $(nproc) cores, $(. /etc/os-release && echo "$PRETTY_NAME"), $(uname -r)"
echo "compilers running now: $(ps aux | grep -c '[c]c1plus'), load average: $(cut -d' ' -f1-3 /proc/loadavg)"

dsn="$("$root/deploy/local/pg.sh" start)"
echo "gnt_admin_$(openssl rand -hex 24)" >"$work/admin.token"
echo "gnj_$(openssl rand -hex 24)" >"$work/join.token"
"$bin/server/gantry-server" --listen 127.0.0.1:0 --db "$dsn" --data-dir "$work/data" \
  --admin-token-file "$work/admin.token" --join-token-file "$work/join.token" \
  >"$work/server.out" 2>"$work/server.log" &
pids+=($!)
for _ in $(seq 1 100); do
  grep -q '^listening on ' "$work/server.out" 2>/dev/null && break
  sleep 0.1
done
server="$(sed -n 's/^listening on //p' "$work/server.out" | head -1)"
[[ -n "$server" ]] || { cat "$work/server.log"; echo "gantry-server did not start" >&2; exit 1; }
export GANTRY_SERVER="$server"
gantry() { "$bin/clients/cli/gantry" "$@"; }
json_field() { /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }

GANTRY_TOKEN="$(cat "$work/admin.token")" gantry admin tenants create bench >/dev/null
GANTRY_TOKEN="$(GANTRY_TOKEN="$(cat "$work/admin.token")" gantry admin tokens create bench --json | json_field token)"
export GANTRY_TOKEN

"$bin/workers/app/gantry-worker" daemon --server "$server" --join-token-file "$work/join.token" \
  --name bench-worker --slots 1 --threads 2 --cache-dir "$work/worker" --advertise-host 127.0.0.1 \
  --rendezvous-ports 29900-29949 >"$work/worker.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 100); do
  GANTRY_TOKEN="$(cat "$work/admin.token")" gantry admin workers 2>/dev/null | grep -q bench-worker && break
  sleep 0.2
done

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
server_pid="${pids[0]}"
worker_pid="${pids[1]}"
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
