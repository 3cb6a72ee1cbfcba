#!/bin/sh
# Test provisioner (scale-up): starts COUNT local gantry-worker daemons labelled pool=POOL, each in
# its own session (they outlive this script), and records their pids in STATE.
# usage: scale_up.sh STATE WORKER_BINARY SERVER JOIN_TOKEN_FILE PORT_BASE POOL COUNT
set -eu
state=$1 bin=$2 server=$3 token=$4 base=$5 pool=$6 count=$7
mkdir -p "$state"
i=0
while [ "$i" -lt "$count" ]; do
  n=$(($(cat "$state/seq" 2>/dev/null || echo 0) + 1))
  echo "$n" >"$state/seq"
  name="$pool-w$n"
  lo=$((base + n * 10))
  setsid "$bin" daemon --server="$server" --join-token-file="$token" --name="$name" --slots=1 \
    --threads=1 --labels="pool=$pool" --cache-dir="$state/$name" --advertise-host=127.0.0.1 \
    --serve-port=-1 --kill-grace-ms=2000 --rendezvous-ports="$lo-$((lo + 9))" \
    </dev/null >"$state/$name.log" 2>&1 &
  echo $! >"$state/$name.pid"
  i=$((i + 1))
done
echo "started $count workers of pool $pool"
