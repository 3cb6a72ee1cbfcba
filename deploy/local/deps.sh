#!/usr/bin/env bash
# Installs the Debian packages gantry needs, only those missing; quiet when everything is present.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
missing=()
for p in "${GANTRY_APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if ! command -v kubectl >/dev/null; then
  echo "deps: installing $GANTRY_APT_KUBECTL (kubectl)"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$GANTRY_APT_KUBECTL" >/dev/null
fi
# npm (for ONNX Runtime below): Debian's npm package, unless the installed nodejs brings its own.
if ! command -v npm >/dev/null; then
  echo "deps: installing npm"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm >/dev/null
fi
# ONNX Runtime (CPU) for the export tests: onnxruntime-node from the npm registry, pinned by the
# committed lockfile in tests/export/ort. Its CPU binaries are in the package; the install script
# would download CUDA binaries from outside unless told to skip them. Reinstalled only when the
# lockfile changed (the stamp holds its SHA-256).
ort="$GANTRY_ROOT/tests/export/ort"
lock_sum="$(sha256sum "$ort/package-lock.json" | cut -d' ' -f1)"
if [[ "$(cat "$ort/node_modules/.gantry-lock-sha256" 2>/dev/null)" != "$lock_sum" ]]; then
  echo "deps: installing onnxruntime-node (npm ci in tests/export/ort)"
  (cd "$ort" && ONNXRUNTIME_NODE_INSTALL_CUDA=skip ONNXRUNTIME_NODE_INSTALL=skip \
     npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  echo "$lock_sum" >"$ort/node_modules/.gantry-lock-sha256"
fi

# buf, the Protocol Buffers linter, for ctest proto.lint: @bufbuild/buf from the npm registry (its
# Linux binary comes as an optional dependency), pinned by the lockfile in tests/proto/buf.
buf_dir="$GANTRY_ROOT/tests/proto/buf"
lock_sum="$(sha256sum "$buf_dir/package-lock.json" | cut -d' ' -f1)"
if [[ "$(cat "$buf_dir/node_modules/.gantry-lock-sha256" 2>/dev/null)" != "$lock_sum" ]]; then
  echo "deps: installing buf (npm ci in tests/proto/buf)"
  (cd "$buf_dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  echo "$lock_sum" >"$buf_dir/node_modules/.gantry-lock-sha256"
fi

# The Kubernetes API schemas for ctest kubernetes.manifests: kubernetes-models (validators generated
# from the Kubernetes OpenAPI spec) and yaml from the npm registry, pinned by the lockfile in
# tests/kubernetes/schema.
k8s_schema="$GANTRY_ROOT/tests/kubernetes/schema"
lock_sum="$(sha256sum "$k8s_schema/package-lock.json" | cut -d' ' -f1)"
if [[ "$(cat "$k8s_schema/node_modules/.gantry-lock-sha256" 2>/dev/null)" != "$lock_sum" ]]; then
  echo "deps: installing the Kubernetes schemas (npm ci in tests/kubernetes/schema)"
  (cd "$k8s_schema" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  echo "$lock_sum" >"$k8s_schema/node_modules/.gantry-lock-sha256"
fi
