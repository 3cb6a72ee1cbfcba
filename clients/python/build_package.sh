#!/usr/bin/env bash
# Builds the gantry-client wheel: stages the hand-written package (gantry_client, gantry_export,
# pyproject.toml) in OUT_DIR/package, generates into it the gantry.v1 messages and gRPC stubs
# (gantry_client/v1) and the google.rpc status protos (gantry_client/rpc, in a private descriptor
# pool) with .pyi type hints, then runs `pip wheel` offline into OUT_DIR/dist.
# Tools (Debian): protoc and grpc_python_plugin (protobuf-compiler-grpc), protoc-gen-mypy_grpc
# (mypy-protobuf), and PYTHON (default /usr/bin/python3) with pip, setuptools and wheel.
# Usage: build_package.sh OUT_DIR VERSION
set -euo pipefail
if [[ $# -ne 2 ]]; then
  echo "usage: build_package.sh OUT_DIR VERSION" >&2
  exit 2
fi
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$1"
version="$2"
python="${PYTHON:-/usr/bin/python3}"
proto_dir="$here/../../proto"
for tool in protoc grpc_python_plugin protoc-gen-mypy_grpc; do
  if ! command -v "$tool" >/dev/null; then
    echo "build_package.sh: $tool not found (deploy/local/deps.sh installs it)" >&2
    exit 1
  fi
done

stage="$out/package"
gen="$out/generated"
rm -rf "$stage" "$gen"
mkdir -p "$stage" "$gen" "$out/dist"
cp "$here/pyproject.toml" "$here/README.md" "$stage/"
cp -r "$here/gantry_client" "$here/gantry_export" "$stage/"
find "$stage" -name __pycache__ -prune -exec rm -rf {} +
printf '"""The package version (written by build_package.sh)."""\n__version__ = "%s"\n' \
  "$version" >"$stage/gantry_client/_version.py"

# gantry.v1 -> gantry_client.v1: the generated modules import each other by their proto path
# ("from gantry.v1 import common_pb2"), rewritten to live inside the package.
(cd "$proto_dir" && protoc --proto_path=. --python_out="$gen" --pyi_out="$gen" \
  --grpc_out="$gen" --plugin=protoc-gen-grpc="$(command -v grpc_python_plugin)" \
  --mypy_grpc_out="$gen" gantry/v1/*.proto) 2>&1 | { grep -v "^Writing mypy to" >&2 || true; }
mkdir -p "$stage/gantry_client/v1"
# In the .pyi, protoc 3.21's `__slots__ = []` of field-less messages becomes a tuple, which type
# checkers accept without an annotation.
for f in "$gen"/gantry/v1/*.py "$gen"/gantry/v1/*.pyi; do
  sed -e 's/^from gantry\.v1 import /from gantry_client.v1 import /' \
      -e 's/\bgantry\.v1\.\([a-z_]*_pb2\)\b/gantry_client.v1.\1/g' \
      -e 's/^\( *\)__slots__ = \[\]$/\1__slots__ = ()/' \
      "$f" >"$stage/gantry_client/v1/$(basename "$f")"
done
printf '"""gantry.v1 messages (*_pb2) and gRPC stubs (*_pb2_grpc), generated from proto/gantry/v1."""\n' \
  >"$stage/gantry_client/v1/__init__.py"

# google.rpc.Status and its standard details, registered in gantry_client.rpc's own descriptor pool
# so they never collide with another copy (googleapis-common-protos) in the default pool.
(cd "$here/../../proto" && protoc --proto_path=. --python_out="$gen" --pyi_out="$gen" \
  google/rpc/status.proto google/rpc/error_details.proto)
for f in status error_details; do
  sed -e 's/_descriptor_pool\.Default()/_gantry_rpc_pool.POOL/' \
      -e 's/^# @@protoc_insertion_point(imports)$/from gantry_client.rpc import _pool as _gantry_rpc_pool\n&/' \
      -e "s/'google\.rpc\.\([a-z_]*_pb2\)'/'gantry_client.rpc.\1'/" \
      "$gen/google/rpc/${f}_pb2.py" >"$stage/gantry_client/rpc/${f}_pb2.py"
  cp "$gen/google/rpc/${f}_pb2.pyi" "$stage/gantry_client/rpc/${f}_pb2.pyi"
done
grep -q '_gantry_rpc_pool.POOL' "$stage/gantry_client/rpc/status_pb2.py" || {
  echo "build_package.sh: protoc's output changed; the private descriptor pool was not wired" >&2
  exit 1
}

rm -f "$out"/dist/gantry_client-*.whl
"$python" -m pip wheel --quiet --no-build-isolation --no-deps --no-index --disable-pip-version-check \
  --wheel-dir "$out/dist" "$stage" >&2
rm -rf "$stage/build" "$stage"/*.egg-info
ls "$out"/dist/gantry_client-"$version"-*.whl
