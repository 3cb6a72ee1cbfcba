#!/usr/bin/env bash
# export.WorkerExportCommand: `gantry-worker export` on a really trained checkpoint (tiny preset,
# one step on toy showers). Its ONNX file passes the python3-onnx checker and runs in ONNX Runtime,
# its PyTorch file rebuilds with clients/python/gantry_export, its TorchScript files (gantry, par04
# and ddml profiles) and its par04 ONNX file load in torchscript_consumer and ONNX Runtime as the
# hooks feed them, all reproducing gantry's own generation from the checkpoint (export_fixture
# --checkpoint) to 1e-4; an existing --out is refused without --force and kept; --force replaces
# it; a bad --format, a profile the format does not write and an unknown profile are refused; no
# FILE.tmp is left behind.
# Usage: worker_export_test.sh GANTRY_WORKER EXPORT_FIXTURE PYTHON3 NODE SOURCE_DIR CONSUMER
set -euo pipefail
worker=$1 fixture=$2 python=$3 node=$4 src=$5 consumer=$6
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$worker" local-train --preset=tiny --data=toymc:layout=25,events=16,seed=1,emin=10,emax=200 \
  --epochs=1 --steps-per-epoch=1 --batch=8 --threads=1 --out="$dir/model.ckpt" >/dev/null
"$fixture" --checkpoint="$dir/model.ckpt" --out_dir="$dir" --count=4 >/dev/null
rm "$dir"/model.{onnx,pt,ts,par04.onnx,par04.ts,ddml.ts}
"$worker" export --checkpoint="$dir/model.ckpt" --format=onnx --out="$dir/model.onnx"
"$worker" export --checkpoint="$dir/model.ckpt" --format=pytorch --out="$dir/model.pt"
"$worker" export --checkpoint="$dir/model.ckpt" --format=torchscript --out="$dir/model.ts"
"$worker" export --checkpoint="$dir/model.ckpt" --format=onnx --profile=par04 \
  --out="$dir/model.par04.onnx"
"$worker" export --checkpoint="$dir/model.ckpt" --format=torchscript --profile=par04 \
  --out="$dir/model.par04.ts"
"$worker" export --checkpoint="$dir/model.ckpt" --format=torchscript --profile=ddml \
  --out="$dir/model.ddml.ts"
"$python" "$src/check_export.py" onnx-checker "$dir"
"$node" "$src/ort/ort_check.mjs" "$dir"
"$python" "$src/check_export.py" pytorch "$dir"
"$consumer" "$dir"

cp "$dir/model.onnx" "$dir/before.onnx"
if "$worker" export --checkpoint="$dir/model.ckpt" --format=pytorch --out="$dir/model.onnx" \
    2>"$dir/err"; then
  fail "an existing --out was overwritten without --force"
fi
grep -q -- "exists; give another --out or --force" "$dir/err" || fail "message: $(cat "$dir/err")"
cmp -s "$dir/model.onnx" "$dir/before.onnx" || fail "the refused export changed the file"
"$worker" export --checkpoint="$dir/model.ckpt" --format=pytorch --out="$dir/model.onnx" --force \
  >/dev/null
cmp -s "$dir/model.onnx" "$dir/model.pt" || fail "--force did not replace the file"

if "$worker" export --checkpoint="$dir/model.ckpt" --format=tflite --out="$dir/x" 2>"$dir/err"; then
  fail "--format=tflite was accepted"
fi
grep -q -- "--format=onnx, --format=pytorch or --format=torchscript" "$dir/err" || fail "message: $(cat "$dir/err")"
if "$worker" export --checkpoint="$dir/model.ckpt" --format=onnx --profile=ddml --out="$dir/x" \
    2>"$dir/err"; then
  fail "--profile=ddml was accepted as onnx"
fi
grep -q -- "give format torchscript" "$dir/err" || fail "message: $(cat "$dir/err")"
if "$worker" export --checkpoint="$dir/model.ckpt" --format=onnx --profile=geant5 --out="$dir/x" \
    2>"$dir/err"; then
  fail "--profile=geant5 was accepted"
fi
grep -q -- "use gantry, par04 or ddml" "$dir/err" || fail "message: $(cat "$dir/err")"
[[ ! -e "$dir/x" ]] || fail "a refused export left a file"
ls "$dir" | grep -q '\.tmp$' && fail "a .tmp file was left behind"
echo "worker export: ok"
