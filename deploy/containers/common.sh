# Shared settings of deploy/containers/{up,flow,down}. Source it; do not run it.
# Every container, network, volume and secret they create is named $ctr-*, so `down` removes exactly
# what `up` made and nothing of anyone else's on the same podman storage.
source "$(dirname "${BASH_SOURCE[0]}")/../local/env.sh"
containers_dir="$GANTRY_ROOT/deploy/containers"
podman() { "$containers_dir/podman" "$@"; }

ctr="${GANTRY_CTR_PREFIX:-gantry-ctr}"
if [[ ! "$ctr" =~ ^gantry-ctr(-[a-z0-9]+)*$ ]]; then
  echo "GANTRY_CTR_PREFIX '$ctr' must be gantry-ctr or gantry-ctr-<suffix> (lower case)" >&2
  exit 2
fi
tag="${GANTRY_IMAGE_TAG:-dev}"
# The network's name ends in the time up made it: podman's address allocator goes on from the last
# address it handed out on a network of the same name, even one removed and created again, so with
# one fixed name it reached the static addresses below within a few runs and a start failed.
network_pattern="^$ctr-net(-[0-9]+)?\$"
network="$(podman network ls --format '{{.Name}}' 2>/dev/null | grep -E "$network_pattern" | head -1 || true)"
# Host port (loopback) published for gantry-server's gRPC port 50051.
host_port="${GANTRY_CTR_PORT:-43051}"
if [[ ! "$host_port" =~ ^[0-9]+$ ]] || ((host_port < 1 || host_port > 65535)); then
  echo "GANTRY_CTR_PORT '$host_port' must be a TCP port number" >&2
  exit 2
fi
# Host-side state: the secrets' source files (mode 0600), the CLI's output directory, logs.
run_dir="${GANTRY_CTR_RUN:-$GANTRY_VAR/containers/$ctr}"
# gantry-server's two gRPC ports on $network: tenants (the CLI) use 50051, the workers the worker
# protocol's own listener, 50052 (--worker-listen), which is not published on the host.
server_in_network="$ctr-server:50051"
worker_server_in_network="$ctr-server:50052"
worker_count=2
# The network's /24 (outside podman's default pool and the kube-play test's 10.144.44) and the static
# addresses of the server and the workers on it, which their TLS certificates name. PostgreSQL and
# the CLI get theirs from podman: once, on a loaded machine, a PostgreSQL stopped and started again
# at a fixed address stayed unreachable from the server (connect timeouts) for over 25 s after it
# was ready; with an address from podman the test had always found it again.
subnet="${GANTRY_CTR_SUBNET:-10.144.45}"
if [[ ! "$subnet" =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]]; then
  echo "GANTRY_CTR_SUBNET '$subnet' must be the first three octets of a /24, e.g. 10.144.45" >&2
  exit 2
fi
server_ip="$subnet.11"
worker_ip() { echo "$subnet.$((20 + $1))"; }  # worker N (1-based)
# TLS material of the run (deploy/local/certs.sh): host side under $run_dir/tls, and where the
# containers find it (podman secrets).
tls_dir_in_ctr=/run/secrets
# The user the gantry images run as (runtime.Containerfile).
gantry_uid=10001

# Options of every long-running container: logs in files (podman logs works without journald). Without
# systemd (this machine, most CI) podman cannot schedule periodic health checks and says so on every
# start; there they are turned off and checked on demand (`podman healthcheck run`, which up does).
run_options=(--log-driver=k8s-file)
[[ -S /run/systemd/private ]] || run_options+=(--health-interval=disable)

# Waits until `podman healthcheck run NAME` passes; prints the container's logs and fails after $2 s.
wait_healthy() {
  local name="$1" limit="$2" start=$SECONDS
  until podman healthcheck run "$name" >/dev/null 2>&1; do
    if [[ "$(podman inspect --format '{{.State.Running}}' "$name" 2>/dev/null)" != true ]]; then
      echo "$name exited; its log:" >&2
      podman logs --tail 40 "$name" >&2 || true
      return 1
    fi
    if ((SECONDS - start > limit)); then
      echo "$name not healthy after $limit s; its log:" >&2
      podman logs --tail 40 "$name" >&2 || true
      return 1
    fi
    sleep 1
  done
}

# The container's address on $network.
container_ip() {
  podman inspect --format "{{(index .NetworkSettings.Networks \"$network\").IPAddress}}" "$1"
}
