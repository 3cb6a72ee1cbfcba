#!/usr/bin/env bash
# ctest kubernetes.podman_play: plays deploy/kubernetes/overlays/local for real with podman 4.3's
# `kube play` (through deploy/containers/podman) and runs gantry's flow across the pods.
#   1. the images localhost/gantry-{server,worker,cli,postgres}:dev (deploy/containers/build; cached);
#   2. the overlay rendered with kubectl kustomize, its secret files made by secrets.sh, and converted
#      by podman_convert.mjs for what podman 4.3 cannot play (the conversions are printed);
#   3. a podman network of its own, then PostgreSQL, gantry-server and two worker pods (the DaemonSet
#      on two simulated nodes), each played with a static IP on it;
#   4. checks, all over TLS from the overlay's CA (plaintext is refused): the server's liveness
#      service (gantry.v1.WorkerService, on the worker port 50052) through the manifest's exec probe,
#      readiness ("" SERVING) from the host, the worker protocol on its own port only, both workers connected (through the worker port) at their pod IPs; an admin makes a
#      tenant and a token, the tenant uploads a small HDF5 dataset, trains a tiny job with world_size 2
#      across the two worker pods to SUCCEEDED, the model is registered, showers are generated (the
#      server dials a worker pod's generation endpoint over TLS, checking the name the workers'
#      shared certificate carries, --worker-tls-name, not the pod IP).
# Everything it creates is named gantry-kube-play-<pid>-* and removed on exit, pass or fail.
# usage: podman_play_test.sh BUILD_DIR
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${1:?usage: podman_play_test.sh BUILD_DIR}"
podman() { "$root/deploy/containers/podman" "$@"; }
prefix="gantry-kube-play-$$"
network="$prefix-net"
# A /24 outside podman's default pool (10.88.0.0/16, 10.89.0.0/16), the same on every run.
subnet="${GANTRY_KUBE_SUBNET:-10.144.44}"
scratch="$(mktemp -d /tmp/gantry-kube-play.XXXXXX)"
start=$SECONDS
step() { printf '== [%3ds] %s\n' "$((SECONDS - start))" "$*"; }
fail() { echo "FAIL: $*" >&2; exit 1; }

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if ((rc != 0)); then
    for ctr in $(podman ps -a --format '{{.Names}}' --filter "name=^$prefix-" 2>/dev/null); do
      [[ "$ctr" == *-infra ]] && continue
      echo "---- last log lines of $ctr" >&2
      podman logs --tail 25 "$ctr" >&2 2>&1 || true
    done
  fi
  # Containers first with their anonymous volumes (the emptyDirs), then the pods, the named volumes
  # (claims and ConfigMaps), the network: only what carries this run's prefix.
  for ctr in $(podman ps -a -q --filter "name=^$prefix-" 2>/dev/null); do
    podman rm -f -v -t 2 "$ctr" >/dev/null 2>&1 || true
  done
  for pod in $(podman pod ps -q --filter "name=^$prefix-" 2>/dev/null); do
    podman pod rm -f -t 2 "$pod" >/dev/null 2>&1 || true
  done
  for volume in $(podman volume ls -q --filter "name=^$prefix-" 2>/dev/null); do
    podman volume rm -f "$volume" >/dev/null 2>&1 || true
  done
  podman network rm -f "$network" >/dev/null 2>&1 || true
  rm -rf "$scratch"
  echo "kubernetes.podman_play: cleaned up ($((SECONDS - start)) s in all)"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# images_current: every image exists and holds exactly this build's binaries (compared by SHA-256
# inside the image), so deploy/containers/build, minutes even when its layers are cached, is skipped.
images_current() {
  local role image files want have
  declare -A inputs=(
    [server]="server/gantry-server server/gantry-inspect clients/probe/gantry-health-probe"
    [worker]="workers/app/gantry-worker" [cli]="clients/cli/gantry showers/gantry-toymc" [postgres]="")
  for role in server worker cli postgres; do
    image="localhost/gantry-$role:dev"
    podman image exists "$image" || return 1
    [[ -n "${inputs[$role]}" ]] || continue
    files=()
    for b in ${inputs[$role]}; do files+=("$b"); done
    want="$(cd "$build" && sha256sum "${files[@]}" 2>/dev/null | awk '{print $1}')" || return 1
    have="$(podman run --rm --network none --entrypoint sha256sum "$image" \
              $(for b in "${files[@]}"; do echo "/usr/local/bin/$(basename "$b")"; done) 2>/dev/null |
            awk '{print $1}')" || return 1
    [[ "$want" == "$have" ]] || return 1
  done
}
if images_current; then
  step "images localhost/gantry-{server,worker,cli,postgres}:dev hold this build's binaries: reused"
else
  step "images (deploy/containers/build)"
  GANTRY_BUILD_DIR="$build" "$root/deploy/containers/build" server worker cli postgres >"$scratch/build.log" 2>&1 ||
    { tail -20 "$scratch/build.log" >&2; fail "deploy/containers/build failed"; }
fi

step "rendering deploy/kubernetes/overlays/local and converting it for podman kube play"
cp -r "$root/deploy/kubernetes" "$scratch/kubernetes"
mkdir "$scratch/local" && cp "$root/deploy/local/certs.sh" "$scratch/local/"  # secrets.sh's CA, as in deploy/
rm -rf "$scratch"/kubernetes/overlays/*/secrets
secrets="$scratch/kubernetes/overlays/local/secrets"
plan="$scratch/play/plan.json"
# render [SECRETS.SH ARGS]: secret files (kept when there), the overlay rendered, validated and
# converted into $scratch/play; prints the conversion.
render() {
  "$scratch/kubernetes/secrets.sh" "$scratch/kubernetes/overlays/local" "$@" >/dev/null
  kubectl kustomize "$scratch/kubernetes/overlays/local" >"$scratch/rendered.yaml" 2>"$scratch/kustomize.err" ||
    fail "kubectl kustomize overlays/local: $(cat "$scratch/kustomize.err")"
  node "$here/validate.mjs" "$scratch/rendered.yaml" >/dev/null || fail "the rendered overlay does not validate"
  rm -rf "$scratch/play"
  node "$here/podman_convert.mjs" "$scratch/rendered.yaml" --prefix "$prefix" --subnet "$subnet" --nodes 2 \
    --out "$scratch/play"
}
# The test reaches gantry-server from the host at its pod's static address, not through a Service
# name as a cluster's clients do: a first rendering finds that address, and the server's certificate
# is issued again naming it too (secrets.sh --tls-san).
render >/dev/null
rm -rf "$secrets/tls"
render --tls-san "IP:$(node -e 'for (const u of JSON.parse(require("fs").readFileSync(process.argv[1])))
                                   if (u.name === "gantry-server") console.log(u.ip);' "$plan")" | sed 's/^/   /'
export GANTRY_CA_CERT="$secrets/tls/ca.pem"
# plan_field UNIT_NAME FIELD...: prints FIELD of each unit whose workload is UNIT_NAME, one a line.
plan_field() {
  node -e 'const [plan, name, field] = process.argv.slice(1);
           for (const u of JSON.parse(require("fs").readFileSync(plan))) if (u.name === name) console.log(u[field]);' \
    "$plan" "$1" "$2"
}

step "network $network ($subnet.0/24)"
podman network rm -f "$network" >/dev/null 2>&1 || true
# Anything podman addresses itself takes the upper half, away from the plan's static addresses.
podman network create --subnet "$subnet.0/24" --ip-range "$subnet.128/25" "$network" >/dev/null

# play UNIT_NAME: plays every file of that workload with its static IP.
play() {
  local file ip
  paste <(plan_field "$1" file) <(plan_field "$1" ip) | while read -r file ip; do
    podman kube play --network "$network" --ip "$ip" "$file" >"$scratch/play.out" 2>&1 ||
      { cat "$scratch/play.out" >&2; fail "podman kube play $(basename "$file") failed"; }
    # (Health checks run on demand here: podman finds no systemd to schedule them, and says so.)
    grep -i 'error' "$scratch/play.out" | grep -v 'systemd connection' >&2 || true
    echo "   played $(basename "$file") at $ip"
  done
}
# The podman container of a played pod: Deployments' pods are named NAME-pod-0 by kube play.
container_of() {  # UNIT_NAME CONTAINER -> container name(s)
  local pod deployment
  paste <(plan_field "$1" pod) <(plan_field "$1" deployment) | while read -r pod deployment; do
    [[ "$deployment" == true ]] && pod="$pod-pod-0"
    echo "$pod-$2"
  done
}
# wait_for SECONDS WHAT COMMAND...: retries COMMAND every second until it succeeds.
wait_for() {
  local limit="$1" what="$2"; shift 2
  local t0=$SECONDS
  until "$@" >/dev/null 2>&1; do
    ((SECONDS - t0 < limit)) || { echo "FAIL: $what: not within $limit s" >&2; return 1; }
    sleep 1
  done
  echo "   $what ($((SECONDS - t0)) s)"
}

step "PostgreSQL (StatefulSet -> Pod)"
play gantry-postgres
pg="$(container_of gantry-postgres postgres)"
wait_for 60 "PostgreSQL accepts connections (its liveness probe, pg_isready)" podman healthcheck run "$pg" || exit 1

step "gantry-server (Deployment)"
play gantry-server
server_ctr="$(container_of gantry-server server)"
server_ip="$(plan_field gantry-server ip)"
export GANTRY_SERVER="$server_ip:50051"
# The manifests run TLS: the CLI trusts the overlay's CA (GANTRY_CA_CERT, above).
cli() { "$build/clients/cli/gantry" "$@"; }
admin_token="$(cat "$scratch/kubernetes/overlays/local/secrets/admin-token")"
server_ready() { GANTRY_TOKEN="$admin_token" cli health; }
# Liveness: the manifest's exec probe (gantry-health-probe ... gantry.v1.WorkerService, over TLS) as
# podman's health check; readiness: the whole server ("") SERVING, asked from the host.
wait_for 60 "gantry-server alive (liveness: grpc.health.v1 gantry.v1.WorkerService)" \
  podman healthcheck run "$server_ctr" || exit 1
wait_for 30 "gantry-server ready (readiness: grpc.health.v1 \"\" SERVING at $GANTRY_SERVER)" server_ready || exit 1
# The worker protocol has its own port (--worker-listen, 50052), the one Service gantry-server-workers
# names and the workers dial; the tenant port does not carry it. (podman enforces no NetworkPolicy:
# that only worker pods reach 50052 is checked on the manifests, by kubernetes.manifests.)
probe() { "$build/clients/probe/gantry-health-probe" "$@" --ca-cert "$GANTRY_CA_CERT"; }
"$build/clients/probe/gantry-health-probe" "$server_ip:50051" --timeout-ms 2000 >/dev/null 2>&1 &&
  fail "gantry-server answers plaintext on $server_ip:50051"
out="$(probe "$server_ip:50051" gantry.v1.WorkerService 2>&1)" &&
  fail "the tenant port $server_ip:50051 serves gantry.v1.WorkerService"
grep -q '(gRPC code 5)' <<<"$out" || fail "the tenant port: expected NOT_FOUND for gantry.v1.WorkerService, got: $out"
probe "$server_ip:50052" gantry.v1.WorkerService >/dev/null ||
  fail "the worker port $server_ip:50052 does not serve gantry.v1.WorkerService"
echo "   TLS only; the worker protocol on $server_ip:50052 only (the tenant port answers NOT_FOUND for it)"

step "two worker pods (DaemonSet on two simulated nodes)"
play gantry-worker
mapfile -t worker_ips < <(plan_field gantry-worker ip)
# connected_workers: "NAME@ADDRESS" of every connected worker, sorted.
connected_workers() {
  GANTRY_TOKEN="$admin_token" cli admin workers --json | /usr/bin/python3 -c '
import json, sys
d = json.load(sys.stdin)
ws = d.get("workers", []) if isinstance(d, dict) else d
print(" ".join(sorted(w["name"] + "@" + w.get("advertiseHost", "") for w in ws if w.get("connected"))))'
}
expected_workers="$prefix-node-1@${worker_ips[0]} $prefix-node-2@${worker_ips[1]}"
workers_as_expected() { [[ "$(connected_workers)" == "$expected_workers" ]]; }
wait_for 60 "both workers connected, named after their nodes, at their pod IPs" workers_as_expected ||
  fail "connected workers: '$(connected_workers)', expected '$expected_workers'"

step "an admin creates tenant physics and its token"
GANTRY_TOKEN="$admin_token" cli admin tenants create physics >/dev/null
export GANTRY_TOKEN
GANTRY_TOKEN="$(GANTRY_TOKEN="$admin_token" cli admin tokens create physics --json |
                /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["token"])')"
[[ "$GANTRY_TOKEN" == gnt_* ]] || fail "no tenant token issued"

step "a small dataset: 256 toy Monte Carlo showers uploaded into the blob store's volume claim"
"$build/showers/gantry-toymc" "toymc:layout=25,events=256,seed=7,emin=10,emax=200" "$scratch/electron-small.h5" >/dev/null
cli datasets upload "$scratch/electron-small.h5" --name kube-small --particle electron >/dev/null
cli datasets get kube-small >/dev/null

step "a tiny job with world_size 2 across the two worker pods"
job="$(cli jobs submit --name kube-tiny --preset tiny --dataset kube-small --epochs 1 --batch 8 \
         --world-size 2 --seed 2 --model-name kube-tiny --json |
       /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')"
echo "   submitted $job"
timeout 240 "$build/clients/cli/gantry" jobs watch "$job" >"$scratch/watch.log" 2>&1 || true
cli jobs get "$job" --json >"$scratch/job.json"
state="$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["state"])' "$scratch/job.json")"
if [[ "$state" != SUCCEEDED && "$state" != JOB_STATE_SUCCEEDED ]]; then
  tail -30 "$scratch/watch.log" >&2
  fail "job $job ended $state, not SUCCEEDED"
fi
echo "   $job SUCCEEDED"
# The two ranks bound to the two worker pods' IPs and met at one of them (c10d rendezvous).
joins="$(grep -o 'joining the process group at [0-9.]*:[0-9]* as rank [0-9]* of [0-9]* (bind [0-9.]*)' "$scratch/watch.log" || true)"
echo "$joins" | sed 's/^/   /'
binds="$(sed -n 's/.*(bind \([0-9.]*\))/\1/p' <<<"$joins" | sort | tr '\n' ' ')"
[[ "$binds" == "$(printf '%s\n' "${worker_ips[@]}" | sort | tr '\n' ' ')" ]] ||
  fail "the ranks bound to '$binds', not to the two worker pods' IPs ${worker_ips[*]}"
master="$(sed -n 's/.*process group at \([0-9.]*\):.*/\1/p' <<<"$joins" | sort -u)"
[[ "$(wc -l <<<"$master")" -eq 1 ]] && printf '%s\n' "${worker_ips[@]}" | grep -qx "$master" ||
  fail "the ranks did not rendezvous at one worker pod's IP: '$master'"

step "the registered model and generation through gantry-server and a worker pod"
model="$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("modelRef", ""))' "$scratch/job.json")"
[[ "$model" == kube-tiny:* ]] || fail "job $job registered no model (modelRef '$model')"
cli models get "$model" >/dev/null
cli generate "$model" --energy 20:180 --count 100 --seed 11 --out "$scratch/generated.h5" --quiet
/usr/bin/python3 - "$scratch/generated.h5" <<'PY'
import sys
import h5py
import numpy as np
with h5py.File(sys.argv[1], "r") as f:
    ecal = f["ECAL"][...]
    energies = f["target"][...][:, 1]
assert ecal.shape == (100, 25, 25, 25), f"ECAL shape {ecal.shape}, expected (100, 25, 25, 25)"
assert np.isfinite(ecal).all() and (ecal >= 0).all(), "ECAL has negative or non-finite cells"
assert ((energies >= 20) & (energies <= 180)).all(), "primary energies outside 20-180 GeV"
print(f"   generated.h5: {ecal.shape[0]} showers, primary energies {energies.min():.1f}-{energies.max():.1f} GeV")
PY
step "passed"
