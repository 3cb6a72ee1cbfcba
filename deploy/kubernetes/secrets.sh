#!/usr/bin/env bash
# Writes the files an overlay's secretGenerator turns into the Secrets gantry-tokens (admin-token,
# join-token), gantry-db (dsn, postgres-password), gantry-tls (the server's certificate and key and
# the CA that signed them) and gantry-worker-tls (the workers' certificate and key), under
# OVERLAY/secrets/ with mode 0600. Files already there are kept,
# so running it again changes nothing; delete one to have it made anew. Nothing it writes is
# committed (.gitignore). Then: kubectl apply -k OVERLAY
#   deploy/kubernetes/secrets.sh deploy/kubernetes/overlays/local
#   deploy/kubernetes/secrets.sh deploy/kubernetes/overlays/gpu-cloud --dsn 'host=db.example.org ...'
# --dsn DSN: the libpq DSN gantry-server uses (a managed PostgreSQL); default: the in-cluster
# PostgreSQL (deploy/kubernetes/postgres) with a fresh random password.
# --tls-san SAN: another subjectAltName for the server's certificate (repeatable; e.g.
# DNS:gantry.example.org for a load balancer's name, IP:203.0.113.7), at its first issue. The
# certificate always names the two Services (gantry-server, gantry-server-workers, in every form the
# cluster's DNS answers) and localhost / 127.0.0.1 (the exec probes). The private CA
# (secrets/tls/ca.pem, its key ca.key) comes from deploy/local/certs.sh and stays on this machine:
# only its certificate goes into the cluster. To use your own CA, put ca.pem, server.pem and
# server.key under OVERLAY/secrets/tls/ before running this.
set -euo pipefail
usage() { echo "usage: $0 OVERLAY_DIR [--dsn DSN]" >&2; exit 2; }
[[ $# -ge 1 ]] || usage
overlay="$1"; shift
dsn=""
sans=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dsn) [[ $# -ge 2 && -n "$2" ]] || { echo "$0: --dsn needs a libpq DSN" >&2; exit 2; }; dsn="$2"; shift 2 ;;
    --dsn=*) dsn="${1#--dsn=}"; [[ -n "$dsn" ]] || { echo "$0: --dsn needs a libpq DSN" >&2; exit 2; }; shift ;;
    --tls-san) [[ $# -ge 2 && "$2" =~ ^(DNS|IP): ]] || { echo "$0: --tls-san needs DNS:NAME or IP:ADDRESS" >&2; exit 2; }
      sans+=",$2"; shift 2 ;;
    *) usage ;;
  esac
done
[[ -f "$overlay/kustomization.yaml" ]] ||
  { echo "$0: $overlay has no kustomization.yaml; give an overlay directory such as deploy/kubernetes/overlays/local" >&2; exit 2; }
command -v openssl >/dev/null || { echo "$0: openssl is needed to make random tokens" >&2; exit 1; }
dir="$overlay/secrets"
mkdir -p "$dir"
chmod 700 "$dir"
umask 077
# Writes VALUE into FILE unless FILE exists and is not empty.
make_once() {
  local file="$dir/$1" value="$2"
  if [[ -s "$file" ]]; then echo "kept    $file"; return; fi
  printf '%s' "$value" >"$file.tmp"
  mv "$file.tmp" "$file"
  echo "created $file"
}
make_once admin-token "gnt_admin_$(openssl rand -hex 24)"
make_once join-token "gnj_$(openssl rand -hex 24)"
make_once postgres-password "$(openssl rand -hex 24)"
if [[ -n "$dsn" ]]; then
  # An explicit DSN replaces the stored one: it is the operator's to change.
  printf '%s' "$dsn" >"$dir/dsn.tmp" && mv "$dir/dsn.tmp" "$dir/dsn"
  echo "set     $dir/dsn"
else
  make_once dsn "host=gantry-postgres port=5432 dbname=gantry user=gantry password=$(cat "$dir/postgres-password") connect_timeout=5"
fi
# TLS: the server's certificate for both Services, in the forms a pod's resolver answers.
service_sans=""
for svc in gantry-server gantry-server-workers; do
  for name in "$svc" "$svc.gantry" "$svc.gantry.svc" "$svc.gantry.svc.cluster.local"; do
    service_sans+="${service_sans:+,}DNS:$name"
  done
done
# The workers share one certificate naming gantry-worker (their pod IPs are not known in advance;
# gantry-server checks that name, --worker-tls-name): the client certificate of mutual TLS and the
# certificate of their generation endpoints.
tls_files="server.pem, server.key, worker-gantry-worker.pem, worker-gantry-worker.key, ca.pem"
if [[ -s "$dir/tls/server.pem" && -s "$dir/tls/server.key" && -s "$dir/tls/ca.pem" &&
      -s "$dir/tls/worker-gantry-worker.pem" && -s "$dir/tls/worker-gantry-worker.key" ]]; then
  echo "kept    $dir/tls ($tls_files)"
else
  certs="$(dirname "${BASH_SOURCE[0]}")/../local/certs.sh"
  GANTRY_TLS_DAYS="${GANTRY_TLS_DAYS:-365}" GANTRY_TLS_SANS="$service_sans$sans" "$certs" "$dir/tls" >/dev/null
  GANTRY_TLS_DAYS="${GANTRY_TLS_DAYS:-365}" GANTRY_TLS_SANS="DNS:gantry-worker" \
    "$certs" "$dir/tls" gantry-worker >/dev/null
  echo "created $dir/tls ($tls_files)"
fi
