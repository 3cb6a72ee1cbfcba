#!/bin/sh
# Test provisioner (scale-down): stops the named daemons started by scale_up.sh (SIGINT: at once)
# and waits for them to exit.
# usage: scale_down.sh STATE POOL COUNT NAME...
set -eu
state=$1 pool=$2
shift 3
for name in "$@"; do
  pidfile="$state/$name.pid"
  [ -f "$pidfile" ] || { echo "no worker $name in pool $pool" >&2; exit 1; }
  pid=$(cat "$pidfile")
  kill -INT "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null || true
  mv "$pidfile" "$state/$name.stopped"
  echo "stopped $name"
done
