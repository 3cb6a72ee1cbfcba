#!/usr/bin/env bash
# A private certificate authority for the demo and the tests (openssl CLI).
#   deploy/local/certs.sh DIR [WORKER_NAME...]
# writes into DIR (created with mode 0700):
#   ca.pem, ca.key                  the CA (reused when DIR already has one)
#   server.pem, server.key          gantry-server: SAN DNS:localhost, IP:127.0.0.1 (+ $GANTRY_TLS_SANS)
#   worker-NAME.pem, worker-NAME.key  one per WORKER_NAME: the client certificate for mutual TLS and
#                                   the certificate of its generation endpoint (same SANs)
# Keys are EC P-256, mode 0600; certificates are valid for $GANTRY_TLS_DAYS days (default 30).
# Existing certificates are kept; delete them to issue new ones. Extra SANs, e.g. for workers on
# other machines: GANTRY_TLS_SANS="DNS:node7.example.org,IP:10.0.0.7".
set -euo pipefail
if [[ $# -lt 1 || "$1" == -* ]]; then
  echo "usage: $0 DIR [WORKER_NAME...]" >&2
  exit 2
fi
dir="$1"
shift
days="${GANTRY_TLS_DAYS:-30}"
sans="DNS:localhost,IP:127.0.0.1${GANTRY_TLS_SANS:+,$GANTRY_TLS_SANS}"
umask 077
mkdir -p "$dir"
chmod 700 "$dir"

if [[ ! -s "$dir/ca.pem" || ! -s "$dir/ca.key" ]]; then
  openssl req -x509 -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days "$days" \
    -subj "/CN=gantry private CA $(date -u +%Y%m%dT%H%M%S)-$RANDOM" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -keyout "$dir/ca.key" -out "$dir/ca.pem" 2>/dev/null
fi

# issue NAME CN: a leaf certificate signed by the CA, for TLS servers and clients.
issue() {
  local name="$1" cn="$2"
  [[ -s "$dir/$name.pem" && -s "$dir/$name.key" ]] && return 0
  local ext="$dir/$name.ext"
  printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature,keyEncipherment" \
    "extendedKeyUsage=serverAuth,clientAuth" "subjectAltName=$sans" >"$ext"
  openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/CN=$cn" \
    -keyout "$dir/$name.key" -out "$dir/$name.csr" 2>/dev/null
  openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
    -days "$days" -sha256 -extfile "$ext" -out "$dir/$name.pem" 2>/dev/null
  rm -f "$dir/$name.csr" "$ext"
}

issue server gantry-server
for worker in "$@"; do
  if [[ ! "$worker" =~ ^[A-Za-z0-9._-]{1,128}$ ]]; then
    echo "$0: worker name '$worker' is not 1-128 characters [A-Za-z0-9._-]" >&2
    exit 2
  fi
  issue "worker-$worker" "$worker"
done
chmod 600 "$dir"/*.key
chmod 644 "$dir"/*.pem
echo "$dir"
