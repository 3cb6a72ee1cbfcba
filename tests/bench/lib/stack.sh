# The whole gantry service on this machine for benchmark scripts: a private PostgreSQL, gantry-server,
# a tenant with a token and worker daemons, all stopped when the script exits. Source it; do not run it.
#   stack_init BUILD_DIR       scratch folder in $stack_work, traps EXIT/INT/TERM (logs kept on failure)
#   stack_start_server         PostgreSQL + gantry-server (port STACK_SERVER_PORT, default an
#                              ephemeral one); exports GANTRY_SERVER
#   stack_tenant NAME          creates the tenant and exports GANTRY_TOKEN (a token of it)
#   stack_start_worker NAME THREADS PORT_BASE [daemon flags...]   one daemon, 50 rendezvous ports
#   stack_wait_workers N       until N workers are connected
#   gantry ARGS...             the CLI of BUILD_DIR;  json_field KEY < json
# Variables after stack_init: stack_root (repository), stack_bin (build dir), stack_work (scratch).
stack_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
stack_pids=()

stack_stop() {
  local rc=$?
  trap - EXIT INT TERM
  for pid in "${stack_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${stack_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  "$stack_root/deploy/local/pg.sh" stop >/dev/null 2>&1 || true
  if [[ $rc -eq 0 && "${STACK_KEEP:-0}" != 1 ]]; then rm -rf "$stack_work"; else echo "logs kept in $stack_work" >&2; fi
  exit "$rc"
}

stack_init() {
  stack_bin="$1"
  stack_work="$(mktemp -d /tmp/gantry-stack-XXXXXX)"
  chmod 755 "$stack_work"   # the private PostgreSQL runs as another user
  export GANTRY_PG_DIR="$stack_work/pg"
  trap stack_stop EXIT
  trap 'exit 130' INT TERM
}

gantry() { "$stack_bin/clients/cli/gantry" "$@"; }
json_field() { /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
stack_admin() { GANTRY_TOKEN="$(cat "$stack_work/admin.token")" gantry "$@"; }

# Benchmarks measure the machine, not the per-tenant limits: the one tenant has none.
stack_start_server() {
  local dsn
  dsn="$("$stack_root/deploy/local/pg.sh" start)"
  echo "gnt_admin_$(openssl rand -hex 24)" >"$stack_work/admin.token"
  echo "gnj_$(openssl rand -hex 24)" >"$stack_work/join.token"
  chmod 600 "$stack_work/admin.token" "$stack_work/join.token"  # the programs refuse shared secrets
  "$stack_bin/server/gantry-server" --listen "127.0.0.1:${STACK_SERVER_PORT:-0}" --db "$dsn" --data-dir "$stack_work/data" \
    --admin-token-file "$stack_work/admin.token" --join-token-file "$stack_work/join.token" \
    --tenant-max-generation-streams 0 --tenant-max-showers-per-minute 0 --tenant-max-streams 0 \
    --max-showers-per-request 0 --tenant-max-concurrent-jobs 0 --tenant-max-study-jobs 0 \
    >"$stack_work/server.out" 2>"$stack_work/server.log" &
  stack_pids+=($!)
  for _ in $(seq 1 100); do
    grep -q '^listening on ' "$stack_work/server.out" 2>/dev/null && break
    sleep 0.1
  done
  GANTRY_SERVER="$(sed -n 's/^listening on //p' "$stack_work/server.out" | head -1)"
  [[ -n "$GANTRY_SERVER" ]] || { cat "$stack_work/server.log"; echo "gantry-server did not start" >&2; return 1; }
  export GANTRY_SERVER
}

stack_tenant() {
  stack_admin admin tenants create "$1" >/dev/null
  GANTRY_TOKEN="$(stack_admin admin tokens create "$1" --json | json_field token)"
  export GANTRY_TOKEN
}

stack_start_worker() {
  local name="$1" threads="$2" port="$3"
  shift 3
  "$stack_bin/workers/app/gantry-worker" daemon --server "$GANTRY_SERVER" \
    --join-token-file "$stack_work/join.token" --name "$name" --slots 1 --threads "$threads" \
    --cache-dir "$stack_work/$name" --advertise-host 127.0.0.1 \
    --rendezvous-ports "$port-$((port + 49))" "$@" >"$stack_work/$name.log" 2>&1 &
  stack_pids+=($!)
}

stack_wait_workers() {
  local connected
  for _ in $(seq 1 150); do
    connected="$(stack_admin admin workers --json 2>/dev/null | /usr/bin/python3 -c '
import json, sys
print(sum(1 for w in json.load(sys.stdin) if w.get("connected")))' 2>/dev/null || echo 0)"
    [[ "$connected" -ge "$1" ]] && return 0
    sleep 0.2
  done
  echo "only $connected of $1 workers connected" >&2
  return 1
}
