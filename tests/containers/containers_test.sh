#!/usr/bin/env bash
# containers.build_up_flow_down: builds the images (deploy/containers/build; cached layers reused),
# checks each one, starts PostgreSQL, gantry-server, two workers and a CLI container (up), checks every
# health check with `podman healthcheck run`, runs the flow across them over TLS (flow: world_size 2
# across the two worker containers, registration, generation), checks that the server's liveness survives a
# PostgreSQL outage while its "" service follows the database, and removes everything (down; also on
# failure); a second `up` over running containers is refused. Only gantry-ctr-test-* containers,
# networks, volumes and secrets are created or removed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export GANTRY_CTR_PREFIX=gantry-ctr-test
export GANTRY_CTR_PORT="${GANTRY_CTR_PORT:-43151}"
source "$root/deploy/containers/common.sh"
deploy="$root/deploy/containers"

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }
timer=$SECONDS
lap() { echo "   ($(( SECONDS - timer )) s)"; timer=$SECONDS; }

cleanup() {
  local rc=$?
  trap - EXIT
  if ((rc != 0)); then
    for name in $(podman ps -a --format '{{.Names}}' | grep -E "^$ctr-" || true); do
      echo "--- log of $name" >&2
      podman logs --tail 30 "$name" >&2 || true
    done
  fi
  "$deploy/down" || rc=1
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
"$deploy/down"   # a run killed before its trap ran

echo "== build"
"$deploy/build"
for image in server worker cli postgres; do
  podman image exists "localhost/gantry-$image:$tag" || fail "localhost/gantry-$image:$tag was not built"
done
pass "images built"; lap
echo "== images refuse bad configuration with a message"
out="$(podman run --rm --network none "localhost/gantry-postgres:$tag" 2>&1)" && fail "postgres started without a password file"
grep -q 'POSTGRES_PASSWORD_FILE' <<<"$out" || fail "postgres: unclear error: $out"
out="$(podman run --rm --network none "localhost/gantry-server:$tag" --db-file /run/secrets/none 2>&1)" &&
  fail "gantry-server started without its DSN file"
grep -q 'cannot read --db-file /run/secrets/none' <<<"$out" || fail "gantry-server: unclear error: $out"
pass "bad configuration refused"; lap

echo "== up"
"$deploy/up"
for name in postgres server worker-1 worker-2 cli; do
  podman healthcheck run "$ctr-$name" >/dev/null || fail "podman healthcheck run $ctr-$name failed"
  [[ "$(podman inspect --format '{{.Config.User}}' "$ctr-$name")" != root ]] || fail "$ctr-$name runs as root"
done
pass "every container healthy (podman healthcheck run)"
# The DSN (its password) and the tokens are files, not in any process's arguments.
processes="$(ps -eo args)"
for secret_file in admin.token join.token pg.password; do
  value="$(cat "$run_dir/$secret_file")"
  [[ -n "$value" && "$processes" != *"$value"* ]] || fail "the $secret_file shows in the process list"
done
pass "no secret in the process list"
out="$("$deploy/up" 2>&1)" && fail "a second up started over the running containers"
grep -q 'run deploy/containers/down first' <<<"$out" || fail "a second up: unclear error: $out"
pass "a second up refused"; lap

echo "== flow"
"$deploy/flow"
pass "flow across the containers"; lap

echo "== PostgreSQL down: the server stays live (health check) while its \"\" service is NOT_SERVING"
podman stop -t 5 "$ctr-postgres" >/dev/null
probe=(podman exec "$ctr-cli" gantry-health-probe "$server_in_network" --ca-cert "$tls_dir_in_ctr/$ctr-tls-ca")
# Within 30 s however long each probe (a podman exec) takes on a loaded machine; the server checks
# PostgreSQL every second.
deadline=$((SECONDS + 30))
while ((SECONDS < deadline)); do
  [[ "$("${probe[@]}" 2>/dev/null || true)" == NOT_SERVING ]] && break
  sleep 0.5
done
[[ "$("${probe[@]}" 2>/dev/null || true)" == NOT_SERVING ]] || fail "the server's \"\" service still SERVING without PostgreSQL"
podman healthcheck run "$ctr-server" >/dev/null || fail "the server's health check failed while only PostgreSQL was down"
podman start "$ctr-postgres" >/dev/null
wait_healthy "$ctr-postgres" 60
deadline=$((SECONDS + 40))
while ((SECONDS < deadline)); do
  [[ "$("${probe[@]}" 2>/dev/null || true)" == SERVING ]] && break
  sleep 0.5
done
[[ "$("${probe[@]}" 2>/dev/null || true)" == SERVING ]] || fail "the server did not come back to SERVING with PostgreSQL"
pass "liveness independent of PostgreSQL, readiness follows it"; lap

echo "== down"
trap - EXIT
"$deploy/down" || fail "down failed"
left="$(podman ps -a --format '{{.Names}}' | grep -E "^$ctr-" || true)"
[[ -z "$left" ]] || fail "containers left after down: $left"
left_networks="$(podman network ls --format '{{.Name}}' | grep -E "$network_pattern")" &&
  fail "networks left after down: $left_networks"
left="$(podman volume ls --format '{{.Name}}' | grep -E "^$ctr-" || true)$(podman secret ls --format '{{.Name}}' | grep -E "^$ctr-" || true)"
[[ -z "$left" ]] || fail "volumes or secrets left after down: $left"
pass "everything removed"; lap
