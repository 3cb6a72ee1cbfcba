#!/usr/bin/env bash
# End-to-end check of the gantry-worker local commands: toymc -> local-train (from the HDF5 file
# and resumed) -> local-generate, with their progress lines and error handling.
#   worker_cli_test.sh <path to gantry-worker>
set -euo pipefail
worker="$1"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$worker" toymc --spec=toymc:layout=25,events=16,seed=3 --out="$dir/toy.h5" | tee "$dir/toymc.log"
grep -q "simulated 16 showers" "$dir/toymc.log" || fail "toymc did not report 16 showers"
[[ -s "$dir/toy.h5" ]] || fail "no toy.h5"

"$worker" local-train --preset=tiny --data="$dir/toy.h5" --epochs=2 --batch=2 --steps-per-epoch=1 \
  --threads=1 --seed=5 --out="$dir/m.ckpt" | tee "$dir/train.log"
[[ "$(grep -c '^epoch ' "$dir/train.log")" == 2 ]] || fail "expected one progress line per epoch"
grep -q "samples/s" "$dir/train.log" || fail "progress line without samples/s"
head -c 19 "$dir/m.ckpt" | grep -q "GANTRY-CHECKPOINT 1" || fail "checkpoint header missing"

"$worker" local-train --resume="$dir/m.ckpt" --data="toymc:layout=25,events=16,seed=3" --epochs=3 \
  --batch=2 --steps-per-epoch=1 --threads=1 --out="$dir/m2.ckpt" | tee "$dir/resume.log"
grep -q "^epoch 3/3" "$dir/resume.log" || fail "resume did not continue at epoch 3"

"$worker" local-generate --checkpoint="$dir/m2.ckpt" --energies=50,100,200 --threads=1 \
  --out="$dir/gen.h5" | tee "$dir/gen.log"
grep -q "generated 3 showers" "$dir/gen.log" || fail "generate did not report 3 showers"
[[ -s "$dir/gen.h5" ]] || fail "no gen.h5"

# Errors are reported, not crashed on.
head -c 1000 "$dir/m2.ckpt" > "$dir/broken.ckpt"
if "$worker" local-generate --checkpoint="$dir/broken.ckpt" --energies=50 --out="$dir/x.h5" \
     2> "$dir/err.log"; then
  fail "a truncated checkpoint was accepted"
fi
grep -q "DATA_LOSS" "$dir/err.log" || fail "truncated checkpoint: expected DATA_LOSS, got $(cat "$dir/err.log")"
# checkpoint-diff: identical files exit 0, different training states 1, unreadable input 2.
"$worker" checkpoint-diff "$dir/m2.ckpt" "$dir/m2.ckpt" > "$dir/diff_same.log" \
  || fail "checkpoint-diff of a file with itself did not exit 0"
grep -q "^0 of [0-9]* parameters and buffers differ" "$dir/diff_same.log" || fail "no summary line"
grep -q "^generator\..* max_abs_diff 0$" "$dir/diff_same.log" || fail "no per-tensor lines"
set +e
"$worker" checkpoint-diff "$dir/m.ckpt" "$dir/m2.ckpt" > "$dir/diff.log"; code=$?
"$worker" checkpoint-diff "$dir/m.ckpt" "$dir/broken.ckpt" 2> "$dir/diff_err.log"; bad=$?
"$worker" checkpoint-diff "$dir/m.ckpt" > /dev/null 2>&1; missing=$?
set -e
[[ $code == 1 ]] || fail "checkpoint-diff of different checkpoints exited $code, not 1"
grep -q "parameters and buffers differ" "$dir/diff.log" || fail "no summary for different files"
[[ $bad == 2 ]] || fail "checkpoint-diff of a truncated file exited $bad, not 2"
grep -q "broken.ckpt" "$dir/diff_err.log" || fail "the error does not name the bad file"
[[ $missing == 2 ]] || fail "checkpoint-diff with one file exited $missing, not 2"

if "$worker" local-train --preset=nope --data=toymc:events=4 --out="$dir/y.ckpt" 2> "$dir/err2.log"; then
  fail "an unknown preset was accepted"
fi
grep -q "unknown model preset" "$dir/err2.log" || fail "unknown preset message missing"
echo PASS
