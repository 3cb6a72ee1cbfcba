#!/usr/bin/env bash
# Replays every file of a corpus folder through a libFuzzer target once (no fuzzing): a seed or a
# regression input that crashes, leaks or trips a sanitizer fails the test.
# Usage: replay_corpus.sh FUZZER CORPUS_DIR
set -euo pipefail
fuzzer="$1"
corpus="$2"
shopt -s nullglob
files=("$corpus"/*)
if [[ ${#files[@]} -eq 0 ]]; then
  echo "no corpus files in $corpus" >&2
  exit 1
fi
echo "replaying ${#files[@]} inputs from $corpus"
exec "$fuzzer" -rss_limit_mb=2048 -timeout=30 "${files[@]}"
