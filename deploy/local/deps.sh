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
# npm packages the tests use, each pinned by a committed package-lock.json in its folder and installed
# with `npm ci` only when that lockfile changed (a stamp in node_modules holds its SHA-256).
#   npm_ci_pinned FOLDER WHAT [VAR=VALUE...]   (the variables go to npm's environment)
npm_ci_pinned() {
  local dir="$GANTRY_ROOT/$1" what="$2" sum
  shift 2
  sum="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
  if [[ "$(cat "$dir/node_modules/.gantry-lock-sha256" 2>/dev/null)" != "$sum" ]]; then
    echo "deps: installing $what (npm ci in ${dir#"$GANTRY_ROOT/"})"
    (cd "$dir" && env "$@" npm ci --no-audit --no-fund --loglevel=error >/dev/null)
    echo "$sum" >"$dir/node_modules/.gantry-lock-sha256"
  fi
}
# ONNX Runtime (CPU) for the export tests: onnxruntime-node. Its CPU binaries are in the package; its
# install script would download CUDA binaries from outside unless told to skip them.
npm_ci_pinned tests/export/ort onnxruntime-node \
  ONNXRUNTIME_NODE_INSTALL_CUDA=skip ONNXRUNTIME_NODE_INSTALL=skip
# buf, the Protocol Buffers linter, for ctest proto.lint: @bufbuild/buf (its Linux binary comes as an
# optional dependency).
npm_ci_pinned tests/proto/buf buf
# The Kubernetes API schemas for ctest kubernetes.manifests: kubernetes-models (validators generated
# from the Kubernetes OpenAPI spec) and yaml.
npm_ci_pinned tests/kubernetes/schema "the Kubernetes schemas"
# The web app (clients/web): TypeScript, esbuild and uPlot; build.sh builds it into $GANTRY_BUILD_DIR/web.
npm_ci_pinned clients/web "the web app's toolchain"
# puppeteer-core for ctest web.*: it drives Debian's chromium; it never downloads a browser.
npm_ci_pinned tests/web puppeteer-core PUPPETEER_SKIP_DOWNLOAD=1
