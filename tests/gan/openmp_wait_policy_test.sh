#!/usr/bin/env bash
# gantry-worker runs LibTorch with OMP_WAIT_POLICY=PASSIVE unless the environment sets a policy:
# it re-executes itself with the variable, so libgomp (which reads its environment before main)
# starts with a spin count of 0. OMP_DISPLAY_ENV makes libgomp print what it uses at start-up.
#   openmp_wait_policy_test.sh <path to gantry-worker>
set -euo pipefail
worker="$1"
dir="$(mktemp -d)"
daemon_pid=""
trap '[[ -n "$daemon_pid" ]] && kill "$daemon_pid" 2>/dev/null; rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# The last block libgomp printed: the settings of the process that runs main() to the end.
last_block() { awk '/OPENMP DISPLAY ENVIRONMENT BEGIN/{b=""} {b=b $0 "\n"} END{printf "%s", b}' "$1"; }

# Unset: one start-up with libgomp's default, then the re-executed program with PASSIVE.
status=0
env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT OMP_DISPLAY_ENV=VERBOSE "$worker" >"$dir/out" 2>"$dir/err" ||
  status=$?
[[ "$status" == 2 ]] || fail "gantry-worker without a command exited $status, expected 2 (usage)"
[[ "$(grep -c 'OPENMP DISPLAY ENVIRONMENT BEGIN' "$dir/err")" == 2 ]] ||
  fail "expected two libgomp start-ups (the re-execution): $(cat "$dir/err")"
[[ "$(grep -c '^usage: gantry-worker' "$dir/err")" == 1 ]] || fail "usage printed more than once"
last_block "$dir/err" | grep -q "OMP_WAIT_POLICY = 'PASSIVE'" || fail "policy is not PASSIVE"
last_block "$dir/err" | grep -q "GOMP_SPINCOUNT = '0'" || fail "libgomp still spins: $(last_block "$dir/err")"

# Set by the user: respected, no re-execution.
status=0
env OMP_WAIT_POLICY=ACTIVE OMP_DISPLAY_ENV=VERBOSE "$worker" >"$dir/out" 2>"$dir/err" || status=$?
[[ "$status" == 2 ]] || fail "exit $status with OMP_WAIT_POLICY=ACTIVE"
[[ "$(grep -c 'OPENMP DISPLAY ENVIRONMENT BEGIN' "$dir/err")" == 1 ]] ||
  fail "re-executed although OMP_WAIT_POLICY was set"
grep -q "OMP_WAIT_POLICY = 'ACTIVE'" "$dir/err" || fail "the user's ACTIVE was overridden"
grep -q "GOMP_SPINCOUNT = '30000000000'" "$dir/err" || fail "ACTIVE without its spin count"

# The re-executed worker still does its work (a tiny toy MC file).
"$worker" toymc --spec=toymc:layout=25,events=4,seed=3 --out="$dir/toy.h5" >"$dir/toymc.log"
grep -q "simulated 4 showers" "$dir/toymc.log" || fail "toymc after the re-execution: $(cat "$dir/toymc.log")"
# The re-executed process keeps its name (the worker container's health check finds the daemon by
# /proc/1/comm). A daemon whose server is not listening (port 53001) keeps retrying, so it can be read.
env -u OMP_WAIT_POLICY "$worker" daemon --server=127.0.0.1:53001 --join-token=t --work-dir="$dir/work" \
  --cache-dir="$dir/cache" >"$dir/daemon.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 1 100); do
  tr '\0' '\n' <"/proc/$daemon_pid/environ" 2>/dev/null | grep -qx OMP_WAIT_POLICY=PASSIVE && break
  sleep 0.1
done
tr '\0' '\n' <"/proc/$daemon_pid/environ" | grep -qx OMP_WAIT_POLICY=PASSIVE ||
  fail "the daemon was not re-executed with PASSIVE: $(cat "$dir/daemon.log")"
[[ "$(cat "/proc/$daemon_pid/comm")" == gantry-worker ]] ||
  fail "the re-executed daemon is named '$(cat "/proc/$daemon_pid/comm")', not gantry-worker"
kill "$daemon_pid"
wait "$daemon_pid" 2>/dev/null || true
daemon_pid=""
echo "PASS"
