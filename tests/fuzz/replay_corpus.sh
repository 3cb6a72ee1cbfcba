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
limits=(-rss_limit_mb=2048)
# As in run_fuzzers.sh: libhdf5 copes with a null malloc, the target lets it have one.
[[ "$(basename "$fuzzer")" == hdf5_inspect_fuzzer ]] && limits=(-rss_limit_mb=0 -malloc_limit_mb=0)
exec "$fuzzer" "${limits[@]}" -timeout=30 "${files[@]}"
