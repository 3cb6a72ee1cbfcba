#!/usr/bin/env bash
# ctest kubernetes.manifests: renders deploy/kubernetes (base, postgres, workers, overlays/local,
# overlays/gpu-cloud) with `kubectl kustomize` in a scratch copy whose secret files secrets.sh wrote,
# validates every object offline against the Kubernetes API schemas (validate.mjs: unknown fields
# fail), checks what the overlays must say (check_rendered.mjs, the NetworkPolicies included), and
# checks that every container is hardened (check_security.mjs: non-root, no privilege escalation, no
# capabilities, RuntimeDefault seccomp, read-only root with /tmp on an emptyDir), and makes sure
# broken manifests fail: an unknown field, a wrong type, an unknown kind, a bad patch in an overlay, a
# missing secret, a worker port reachable by more than worker pods, a container missing a hardening
# setting.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
command -v kubectl >/dev/null ||
  { echo "FAIL: kubectl is missing (deploy/local/deps.sh installs Debian's kubernetes-client)" >&2; exit 1; }
[[ -d "$here/schema/node_modules/kubernetes-models" ]] ||
  { echo "FAIL: the schema package is missing: run deploy/local/deps.sh (npm ci in tests/kubernetes/schema)" >&2; exit 1; }
scratch="$(mktemp -d /tmp/gantry-kube-manifests.XXXXXX)"
trap 'rm -rf "$scratch"' EXIT
cp -r "$root/deploy/kubernetes" "$scratch/kubernetes"
mkdir "$scratch/local" && cp "$root/deploy/local/certs.sh" "$scratch/local/"  # secrets.sh's CA, as in deploy/
rm -rf "$scratch"/kubernetes/overlays/*/secrets   # never the operator's own secret files
k="$scratch/kubernetes"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
render() { kubectl kustomize "$1" 2>"$scratch/kustomize.err"; }

echo "== kubectl: $(kubectl version --client --short 2>/dev/null || kubectl version --client 2>/dev/null | head -1)"

# secrets.sh: files with mode 0600, kept on a second run, a DSN naming the in-cluster PostgreSQL.
for overlay in local gpu-cloud; do
  "$k/secrets.sh" "$k/overlays/$overlay" >/dev/null
  every_secret() { find "$k/overlays/$overlay/secrets" -type f | sort | xargs cat; }
  before="$(every_secret)"
  "$k/secrets.sh" "$k/overlays/$overlay" >"$scratch/again.out"
  [[ "$(grep -c '^kept ' "$scratch/again.out")" == 5 ]] || fail "secrets.sh did not keep the existing files"
  [[ "$(every_secret)" == "$before" ]] ||
    fail "secrets.sh changed existing secrets of $overlay"
  # The server's certificate: signed by the CA, naming both Services and the probes' loopback.
  tls="$k/overlays/$overlay/secrets/tls"
  [[ "$(stat -c %a "$tls/server.key")" == 600 ]] || fail "$overlay/secrets/tls/server.key is not mode 0600"
  openssl verify -CAfile "$tls/ca.pem" "$tls/server.pem" >/dev/null || fail "server.pem is not signed by ca.pem"
  sans="$(openssl x509 -in "$tls/server.pem" -noout -ext subjectAltName)"
  for name in DNS:gantry-server DNS:gantry-server-workers DNS:gantry-server-workers.gantry.svc.cluster.local \
              DNS:localhost "IP Address:127.0.0.1"; do
    grep -q "$name\b" <<<"$sans" || fail "the server certificate of $overlay does not name $name: $sans"
  done
  openssl verify -CAfile "$tls/ca.pem" "$tls/worker-gantry-worker.pem" >/dev/null ||
    fail "the workers' certificate is not signed by ca.pem"
  openssl x509 -in "$tls/worker-gantry-worker.pem" -noout -ext subjectAltName | grep -q "DNS:gantry-worker\b" ||
    fail "the workers' certificate of $overlay does not name gantry-worker"
  for f in admin-token join-token postgres-password dsn; do
    [[ -s "$k/overlays/$overlay/secrets/$f" ]] || fail "secrets.sh wrote no $overlay/secrets/$f"
    [[ "$(stat -c %a "$k/overlays/$overlay/secrets/$f")" == 600 ]] || fail "$overlay/secrets/$f is not mode 0600"
  done
  grep -q "^host=gantry-postgres .*password=$(cat "$k/overlays/$overlay/secrets/postgres-password") " \
    "$k/overlays/$overlay/secrets/dsn" || fail "the default DSN does not name gantry-postgres with the generated password"
done
"$k/secrets.sh" "$scratch/nowhere" 2>"$scratch/err" && fail "secrets.sh accepted a directory without kustomization.yaml"
grep -q "has no kustomization.yaml" "$scratch/err" || fail "secrets.sh's error does not say what is wrong"
"$k/secrets.sh" "$k/overlays/local" --tls-san gantry.example.org 2>"$scratch/err" &&
  fail "secrets.sh accepted a --tls-san without DNS: or IP:"
grep -q "DNS:NAME or IP:ADDRESS" "$scratch/err" || fail "secrets.sh's --tls-san error does not say what to give"
"$k/secrets.sh" "$k/overlays/gpu-cloud" --dsn "host=db.example.org dbname=gantry sslmode=require" >/dev/null
[[ "$(cat "$k/overlays/gpu-cloud/secrets/dsn")" == "host=db.example.org dbname=gantry sslmode=require" ]] ||
  fail "secrets.sh --dsn did not set the managed PostgreSQL DSN"

# Every kustomization renders, and every object it renders is valid.
for dir in base postgres workers overlays/local overlays/gpu-cloud; do
  out="$scratch/$(echo "$dir" | tr / -).yaml"
  if ! render "$k/$dir" >"$out"; then
    fail "kubectl kustomize $dir: $(cat "$scratch/kustomize.err")"
    continue
  fi
  if ! node "$here/validate.mjs" "$out" >"$scratch/validate.out"; then
    fail "$dir does not validate:"; cat "$scratch/validate.out"
  else
    echo "$dir: $(tail -1 "$scratch/validate.out")"
  fi
done
for overlay in local gpu-cloud; do
  node "$here/check_rendered.mjs" "$overlay" "$scratch/overlays-$overlay.yaml" || fail "$overlay misses expectations above"
done
# Every container of every rendered manifest is hardened (check_security.mjs), and dropping any one
# setting from one container is caught, naming it.
rendered=("$scratch"/base.yaml "$scratch"/postgres.yaml "$scratch"/workers.yaml "$scratch"/overlays-*.yaml)
if node "$here/check_security.mjs" "${rendered[@]}" >"$scratch/security.out"; then
  echo "security contexts: $(tail -1 "$scratch/security.out")"
else
  fail "containers are not hardened:"; cat "$scratch/security.out"
fi
# expect_refused CHECK ARG NAME PATTERN JS: the local overlay changed by JS (statements over
# `objects`, the rendered objects; `policy(name)`, a NetworkPolicy; `pod`, the worker DaemonSet's pod
# spec; `c`, its first container) must fail `node CHECK [ARG] FILE` and make it print PATTERN.
expect_refused() {
  local check="$1" arg="$2" name="$3" pattern="$4"
  node --input-type=module -e '
    const [input, output, yamlModule, body] = process.argv.slice(1);
    const { readFileSync, writeFileSync } = await import("node:fs");
    const { parseAllDocuments, stringify } = await import(yamlModule);
    const objects = parseAllDocuments(readFileSync(input, "utf8")).map((d) => d.toJS()).filter(Boolean);
    const policy = (name) => objects.find((o) => o.kind === "NetworkPolicy" && o.metadata.name === name);
    const pod = objects.find((o) => o.kind === "DaemonSet").spec.template.spec;
    new Function("objects", "policy", "pod", "c", body)(objects, policy, pod, pod.containers[0]);
    writeFileSync(output, objects.map((o) => stringify(o)).join("---\n"));
  ' "$scratch/overlays-local.yaml" "$scratch/bad.yaml" "$here/schema/node_modules/yaml/dist/index.js" "$5"
  if node "$check" ${arg:+"$arg"} "$scratch/bad.yaml" >"$scratch/bad.out"; then
    fail "$name passed $(basename "$check")"
  elif ! grep -q -- "$pattern" "$scratch/bad.out"; then
    fail "$name: $(basename "$check") does not name the problem ($pattern):"; cat "$scratch/bad.out"
  else
    echo "refused as expected ($name): $(grep -m1 -- "$pattern" "$scratch/bad.out")"
  fi
}
# expect_unhardened NAME PATTERN JS: check_security.mjs must refuse the change (expect_refused).
expect_unhardened() { expect_refused "$here/check_security.mjs" "" "$@"; }
expect_unhardened "no runAsNonRoot" "runAsNonRoot is not true" \
  'delete c.securityContext.runAsNonRoot; delete pod.securityContext.runAsNonRoot;'
expect_unhardened "root user" "runAsUser is 0" 'c.securityContext.runAsUser = 0;'
expect_unhardened "privilege escalation" "allowPrivilegeEscalation is not false" \
  'delete c.securityContext.allowPrivilegeEscalation;'
expect_unhardened "capabilities kept" "capabilities.drop does not hold ALL" \
  'c.securityContext.capabilities.drop = ["NET_RAW"];'
expect_unhardened "a capability added" "capabilities.add is not empty" \
  'c.securityContext.capabilities.add = ["SYS_ADMIN"];'
expect_unhardened "no seccomp profile" "seccompProfile.type is not RuntimeDefault" \
  'c.securityContext.seccompProfile = { type: "Unconfined" };'
expect_unhardened "a writable root filesystem" "readOnlyRootFilesystem is not true" \
  'c.securityContext.readOnlyRootFilesystem = false;'
expect_unhardened "no /tmp volume" "/tmp is not a writable emptyDir" \
  'c.volumeMounts = c.volumeMounts.filter((m) => m.mountPath !== "/tmp");'
# The NetworkPolicy shape is asserted, not assumed: each widening of what reaches the server's worker
# port must fail check_rendered.mjs, naming the problem.
# expect_unchecked NAME PATTERN JS: check_rendered.mjs must refuse the change (expect_refused).
expect_unchecked() { expect_refused "$here/check_rendered.mjs" local "$@"; }
worker_port_open="admits peers other than gantry-worker pods to gantry-server's worker port"
expect_unchecked "the worker port open to every peer" "$worker_port_open" \
  'delete policy("gantry-server-worker-ingress").spec.ingress[0].from;'
expect_unchecked "the worker port open to another namespace" "$worker_port_open" \
  'policy("gantry-server-worker-ingress").spec.ingress[0].from.push({ namespaceSelector: {} });'
expect_unchecked "the worker port open to an address block" "$worker_port_open" \
  'policy("gantry-server-worker-ingress").spec.ingress[0].from.push({ ipBlock: { cidr: "0.0.0.0/0" } });'
expect_unchecked "the tenant rule opened to every port" "$worker_port_open" \
  'delete policy("gantry-server-ingress").spec.ingress[0].ports;'
expect_unchecked "the tenant rule opened to a port range" "$worker_port_open" \
  'policy("gantry-server-ingress").spec.ingress[0].ports[0].endPort = 50100;'
expect_unchecked "no rule for the worker port" "no NetworkPolicy admits worker pods" \
  'policy("gantry-server-worker-ingress").spec.ingress = [];'
expect_unchecked "workers dialling the tenant port" "--server is not gantry-server-workers:50052" \
  'for (const o of objects) if (o.kind === "DaemonSet") o.spec.template.spec.containers[0].args =
     o.spec.template.spec.containers[0].args.map((a) => a.startsWith("--server=") ? "--server=gantry-server:50051" : a);'
expect_unchecked "the worker port behind the tenant Service" "Service gantry-server does not expose exactly" \
  'objects.find((o) => o.kind === "Service" && o.metadata.name === "gantry-server").spec.ports.push(
     { name: "worker-grpc", port: 50052, targetPort: "worker-grpc" });'
# TLS: the server without its certificate, a probe that cannot speak TLS, workers that do not check
# the server, the server's key handed to workers.
server_of='const server = objects.find((o) => o.kind === "Deployment" && o.metadata.name === "gantry-server").spec.template.spec.containers[0];'
expect_unchecked "the server without TLS" "--tls-cert/--tls-key are not" \
  "$server_of"' server.args = server.args.filter((a) => !a.startsWith("--tls-"));'
expect_unchecked "a kubelet gRPC probe (no TLS)" "readiness is not gantry-health-probe over TLS" \
  "$server_of"' server.readinessProbe = { grpc: { port: 50051, service: "" } };'
expect_unchecked "workers without the CA" "--ca-cert is not the CA of Secret gantry-tls" \
  'c.args = c.args.filter((a) => !a.startsWith("--ca-cert"));'
expect_unchecked "the server key on workers" "--ca-cert is not the CA of Secret gantry-tls" \
  'delete pod.volumes.find((v) => v.secret?.secretName === "gantry-tls").secret.items;'
expect_unchecked "workers serving plaintext" "not serving and connecting with the certificate" \
  'c.args = c.args.filter((a) => !a.startsWith("--tls-")).concat(["--serve-plaintext"]);'
expect_unchecked "the server not asking workers for certificates" "does not ask workers for certificates" \
  "$server_of"' server.args = server.args.filter((a) => !a.startsWith("--tls-client-ca"));'
# The managed-PostgreSQL variant, made as docs/DEPLOYMENT.md tells: the gpu-cloud overlay without
# its two lines marked "in-cluster PostgreSQL".
sed -i '/# in-cluster PostgreSQL$/d' "$k/overlays/gpu-cloud/kustomization.yaml"
if render "$k/overlays/gpu-cloud" >"$scratch/managed.yaml"; then
  node "$here/validate.mjs" "$scratch/managed.yaml" >/dev/null || fail "the managed-PostgreSQL variant does not validate"
  grep -q "kind: StatefulSet" "$scratch/managed.yaml" && fail "the managed-PostgreSQL variant still runs PostgreSQL"
else
  fail "the managed-PostgreSQL variant does not render: $(cat "$scratch/kustomize.err")"
fi

# Negative checks: each broken input must be refused, naming the problem.
# expect_invalid NAME PATTERN: validate.mjs must fail on $scratch/bad.yaml and print PATTERN.
expect_invalid() {
  if node "$here/validate.mjs" "$scratch/bad.yaml" >"$scratch/bad.out"; then
    fail "$1 passed validation"
  elif ! grep -q -- "$2" "$scratch/bad.out"; then
    fail "$1: the output does not name the problem ($2):"; cat "$scratch/bad.out"
  else
    echo "refused as expected ($1): $(grep -m1 -- "$2" "$scratch/bad.out")"
  fi
}
sed 's/^\(\s*\)readinessProbe:/\1readinessProbes:/' "$scratch/overlays-local.yaml" >"$scratch/bad.yaml"
expect_invalid "a misspelt container field" "unknown field .spec.template.spec.containers\[0\].readinessProbes"
sed 's/^\(\s*\)replicas: 1$/\1replicas: one/' "$scratch/overlays-local.yaml" >"$scratch/bad.yaml"
expect_invalid "replicas as a string" "/spec/replicas type"
sed 's/^kind: DaemonSet$/kind: DaemonSets/' "$scratch/overlays-local.yaml" >"$scratch/bad.yaml"
expect_invalid "an unknown kind" "no schema for apiVersion apps/v1 kind DaemonSets"
sed 's/^\(\s*\)policyTypes:$/\1policyType:/' "$scratch/base.yaml" >"$scratch/bad.yaml"
expect_invalid "a misspelt NetworkPolicy field" "unknown field .spec.policyType"
printf 'apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  ports:\n  - port: 80\n    protocol: TCP\n    bogus: 1\n' >"$scratch/bad.yaml"
expect_invalid "an unknown field in a list item" "unknown field .spec.ports\[0\].bogus"
# A bad patch in an overlay (a number as a string): the rendered overlay carries the mistake and must fail validation.
cat >>"$k/overlays/local/sizes.yaml" <<'EOF'
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: gantry-server
  namespace: gantry
spec:
  template:
    spec:
      terminationGracePeriodSeconds: "30"
EOF
# kubectl 1.20's kustomize refuses the patch itself; later ones render it and the schema refuses it.
if render "$k/overlays/local" >"$scratch/bad.yaml"; then
  expect_invalid "an overlay patch with a string grace period" "terminationGracePeriodSeconds type"
else
  echo "refused as expected (an overlay patch with a string grace period): kustomize: $(grep -v '^# Warning' "$scratch/kustomize.err" | head -3 | tr '\n' ' ')"
fi
# A missing secret file: kustomize must refuse to render the overlay.
rm "$k/overlays/local/secrets/join-token"
render "$k/overlays/local" >/dev/null && fail "the local overlay rendered without its join-token file"

if ((failures > 0)); then
  echo "kubernetes.manifests: $failures failure(s)"
  exit 1
fi
echo "kubernetes.manifests: every manifest valid, every broken one refused"
