#!/usr/bin/env bash
# Generates the Python messages and gRPC stubs of gantry.v1 into OUT_DIR (default: ./gen) with the
# Debian protoc and grpc_python_plugin (package protobuf-compiler-grpc), which match the installed
# python3-grpcio 1.51 and python3-protobuf 3.21. Usage: generate_stubs.sh [OUT_DIR]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
proto_dir="$here/../../proto"
out="${1:-$here/gen}"
plugin="$(command -v grpc_python_plugin || true)"
if [[ -z "$plugin" ]]; then
  echo "generate_stubs.sh: grpc_python_plugin not found (apt-get install protobuf-compiler-grpc)" >&2
  exit 1
fi
mkdir -p "$out"
cd "$proto_dir"
protoc --proto_path=. --python_out="$out" --grpc_out="$out" --plugin=protoc-gen-grpc="$plugin" \
  gantry/v1/*.proto
echo "$out"
