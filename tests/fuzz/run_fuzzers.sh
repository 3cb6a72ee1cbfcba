#!/usr/bin/env bash
# Fuzzes every gantry libFuzzer target for a bounded time, starting from its seed corpus in
# tests/fuzz/corpus/<target>/ (read only; new inputs go to a scratch folder). Fails on the first
# crash, leak, sanitizer report or timeout, naming the crashing input: copy it into the target's
# corpus folder (a regression input, replayed by ctest fuzz.<target>.corpus) along with the fix.
# Usage: run_fuzzers.sh FUZZER_DIR SECONDS_PER_TARGET [TARGET...]
# Longer local runs: run_fuzzers.sh build-asan/tests/fuzz 1200 hdf5_inspect_fuzzer
# (set GANTRY_FUZZ_KEEP=DIR to keep the grown corpora in DIR/<target>).
# The random seed is fixed (GANTRY_FUZZ_SEED, default 1) so that a CI failure reproduces; use
# GANTRY_FUZZ_SEED=0 (a new seed each run) for long local runs.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bin_dir="$1"
seconds="$2"
shift 2
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(hdf5_inspect_fuzzer checkpoint_envelope_fuzzer model_config_fuzzer dataset_ref_fuzzer
           job_spec_json_fuzzer baseline_payload_fuzzer)
fi
scratch="$(mktemp -d "${TMPDIR:-/tmp}/gantry-fuzz.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
# fuzz_one TARGET: fuzzes TARGET, writes its report to $scratch/TARGET.report, exits non-zero on a
# finding.
fuzz_one() {
  local t="$1" work log start limits execs a keep
  work="${GANTRY_FUZZ_KEEP:+$GANTRY_FUZZ_KEEP/$t}"
  work="${work:-$scratch/corpus-$t}"
  mkdir -p "$work" "$scratch/artifacts-$t"
  log="$scratch/$t.log"
  start=$SECONDS
  # -timeout: one input taking longer than 10 s is a finding; -rss_limit_mb and -malloc_limit_mb:
  # an input that makes the code allocate more than 2 GiB is one too (sizes must be bounded).
  limits=(-rss_limit_mb=2048 -malloc_limit_mb=2048)
  # libhdf5 allocates what a corrupt file asks for and copes with a null malloc (the target sets
  # allocator_may_return_null and a soft RSS limit for it): no libFuzzer malloc limit there.
  [[ "$t" == hdf5_inspect_fuzzer ]] && limits=(-rss_limit_mb=0 -malloc_limit_mb=0)
  if TMPDIR="$scratch" "$bin_dir/$t" -max_total_time="$seconds" -timeout=10 "${limits[@]}" \
      -print_final_stats=1 -seed="${GANTRY_FUZZ_SEED:-1}" -artifact_prefix="$scratch/artifacts-$t/" \
      "$work" "$here/corpus/$t" >"$log" 2>&1; then
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
    echo "fuzz $t: ok, $((SECONDS - start)) s, $execs executions, corpus $(ls "$work" | wc -l) new + $(ls "$here/corpus/$t" | wc -l) seeds" >"$scratch/$t.report"
    return 0
  fi
  {
    echo "fuzz $t: FAILED after $((SECONDS - start)) s; the last 60 lines of its log:"
    tail -n 60 "$log"
    for a in "$scratch/artifacts-$t"/*; do
      [[ -e "$a" ]] || continue
      keep="${GANTRY_FUZZ_ARTIFACTS:-$PWD}/$(basename "$a")-$t"
      cp "$a" "$keep"
      echo "crashing input kept as $keep: fix the bug and add it to tests/fuzz/corpus/$t/"
    done
  } >"$scratch/$t.report"
  return 1
}

# The targets run side by side, GANTRY_FUZZ_JOBS at a time (default: one per CPU); the reports
# print in the targets' order.
jobs="${GANTRY_FUZZ_JOBS:-$(nproc)}"
pids=()
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  fuzz_one "$t" &
  pids+=($!)
done
status=0
for i in "${!targets[@]}"; do
  wait "${pids[$i]}" || status=1
  cat "$scratch/${targets[$i]}.report"
done
exit $status
