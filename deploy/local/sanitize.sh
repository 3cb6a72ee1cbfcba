#!/usr/bin/env bash
# The sanitizer stage of CI: configures (once) a second build directory with clang-14,
# AddressSanitizer + UndefinedBehaviorSanitizer and without LibTorch, builds the torch-free tests
# and the libFuzzer targets (tests/fuzz), runs those tests (ctest, the same GANTRY_TEST_DSN), then
# fuzzes each target for a bounded time. Exits non-zero on any test failure, sanitizer report or
# fuzzer crash. deploy/local/test calls it after the normal tests; it also runs on its own
# (it then needs GANTRY_TEST_DSN for the PostgreSQL tests).
#   sanitize.sh [build|test|fuzz]  one step only (deploy/local/test times each as a phase); all three
#                                   when none is named
#   GANTRY_ASAN_BUILD_DIR      build directory (default build-asan)
#   GANTRY_FUZZ_SECONDS        seconds of fuzzing per target (default 15; 0 skips fuzzing)
#   GANTRY_SANITIZE_CTEST_ARGS extra ctest arguments (e.g. "-R showers")
#   GANTRY_SANITIZE_JOBS       tests run at once (default: GANTRY_JOBS + 1; they mostly wait)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
build="${GANTRY_ASAN_BUILD_DIR:-$GANTRY_ROOT/build-asan}"
fuzz_seconds="${GANTRY_FUZZ_SECONDS:-15}"
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
# Every library is built with libFuzzer's coverage instrumentation too (fuzzer-no-link), so the
# fuzz targets see the branches of the code they drive; tests do not notice it.
cflags="$sanitize -fsanitize=fuzzer-no-link"
# --as-needed as Debian's gcc links by default (clang does not): otherwise every shared library named
# on a link line is loaded, and a test that compiles its own copy of a .proto that such a library
# also holds (grpc reflection) aborts on the duplicate descriptor.
ldflags="$sanitize -Wl,--as-needed"
step="${1:-all}"
case "$step" in all | build | test | fuzz) ;; *) echo "usage: sanitize.sh [build|test|fuzz]" >&2; exit 2 ;; esac
launcher="$(gantry_ccache_launcher)"
# -O1 with line tables: a quick build and readable stacks. Not -O0 (about half the compile time):
# nothing is inlined there, so the linker may take an uninstrumented test's copy of an Abseil
# container template for the instrumented libraries' (ASan's container poisoning then misfires,
# docs/studies/2026-11-29-ci-time.md), and Eigen's numerics run 10-20 times slower.
# The instrumentation goes to the code under test only (GANTRY_SANITIZER_FLAGS: not tests/); the
# benchmarks are left out. Precompiled headers are off although this build supports them (28% less
# compile time with an empty cache, measured on 17 units): CMake gives clang the header by absolute
# paths after -Xclang, which ccache cannot make relative, so a new clone recompiled the 244 units
# that use them (CI's warm build would grow by about 460 s; docs/studies/2026-11-29-asan-stage.md).
configure=(-G Ninja -DCMAKE_BUILD_TYPE=Sanitize
  -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14
  "-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher" "-DCMAKE_C_COMPILER_LAUNCHER=$launcher"
  "-DCMAKE_CXX_FLAGS_SANITIZE=-O1 -gline-tables-only" "-DCMAKE_C_FLAGS_SANITIZE=-O1 -gline-tables-only"
  "-DGANTRY_SANITIZER_FLAGS=$cflags"
  "-DCMAKE_EXE_LINKER_FLAGS_SANITIZE=$ldflags" "-DCMAKE_SHARED_LINKER_FLAGS_SANITIZE=$ldflags"
  -DGANTRY_WITH_TORCH=OFF -DGANTRY_FUZZ=ON -DGANTRY_BENCHMARKS=OFF -DGANTRY_PRECOMPILED_HEADERS=OFF)
# Configured when new, and again when these settings changed since (their digest is kept beside the
# cache).
digest="$(printf '%s\n' "${configure[@]}" | sha256sum | cut -c1-16)"
if [[ ! -f "$build/CMakeCache.txt" || "$(cat "$build/gantry-configure.digest" 2>/dev/null)" != "$digest" ]]; then
  cmake -S "$GANTRY_ROOT" -B "$build" "${configure[@]}" >/dev/null
  echo "$digest" >"$build/gantry-configure.digest"
fi

# Everything this configuration has: with GANTRY_WITH_TORCH=OFF that is the torch-free tests (base,
# showers, gan config, storage, scheduler, server, cli, physics, agent, serving), the binaries they
# start, the fuzzers and a few torch-free benchmarks; tests/e2e and tests/chaos need gantry-worker,
# hence LibTorch, and are not configured.
if [[ "$step" == all || "$step" == build ]]; then
  start=$SECONDS
  cmake --build "$build" -j "$GANTRY_JOBS"
  echo "sanitizer build: $((SECONDS - start)) s"
fi

# detect_leaks=1: LeakSanitizer checks every test process at exit; lsan.supp lists the leaks of
# third-party libraries that are by design (each entry says why). allocator_may_return_null=1: a
# huge allocation fails with null as glibc's malloc does in production (the hostile-file tests
# make HDF5 ask for such), instead of aborting the process.
supp="$GANTRY_ROOT/deploy/local/sanitizers"
export ASAN_OPTIONS="allocator_may_return_null=1:detect_leaks=1:abort_on_error=0:detect_stack_use_after_return=0:strict_string_checks=1:check_initialization_order=1"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp"
symbolizer="$(command -v llvm-symbolizer-14 || command -v llvm-symbolizer || true)"
[[ -n "$symbolizer" ]] && export ASAN_SYMBOLIZER_PATH="$symbolizer"

if [[ "$step" == all || "$step" == test ]]; then
  start=$SECONDS
  # Left out by default: the scheduler's long pure-logic simulation and property runs, the study
  # optimisers' statistical comparisons over many searches, the physics metrics' statistical
  # runs (classifier trainings on thousands of toy showers; the tests of their input checks stay)
  # and the baselines' statistical matches to the data (their determinism and hostile cases stay)
  # (no memory handling a sanitizer would add to; they run in the normal stage), the watchdog test, which
  # asserts a wall-clock bound that the sanitizers' slowdown breaks, and the misbehaving-inspector
  # test, whose instrumented child cannot start under the address-space limit it sets (ASan reserves
  # terabytes of shadow memory up front).
  skip='^scheduler\.Scheduler(Simulation|Property)Test\.|^server\.ServerWatchdogTest\.'
  skip+='|^studies\.OptimizerTest\..*(BetterThan|FewerEvaluationsThan)Random'
  skip+='|^physics\.FieldMetricsTest\.MonteCarloAgainstItself'
  skip+='|^physics\.ClassifierTwoSampleTest\.(SameDistribution|ShiftedMean)'
  skip+='|^baseline\.BaselineSamplerTest\.(MatchesTheData|SpotsMatch)'
  skip+='|^server\.ServerHostileUploadTest\.AnInspectionChildThatDiesOrMisbehaves'
  if [[ -n "${GANTRY_SANITIZE_CTEST_ARGS:-}" ]]; then
    read -r -a extra <<<"$GANTRY_SANITIZE_CTEST_ARGS"
  else
    extra=(-E "$skip")
    echo "not run under the sanitizers (they run in the normal stage): tests matching $skip"
  fi
  # One test per core. (It was one more: the server tests waited up to 5 s each for their idle
  # client channel at shutdown, and -j2 kept 2 cores 54% busy. Without that wait -j3 kept them 91%
  # busy and tests that race timers under ASan failed; docs/studies/2026-12-01-test-start-and-
  # shutdown-costs.md.) GANTRY_SANITIZE_JOBS overrides.
  jobs="${GANTRY_SANITIZE_JOBS:-$GANTRY_JOBS}"
  (cd "$build" && ctest --output-on-failure -j "$jobs" --timeout 600 "${extra[@]}")
  echo "sanitizer tests: $((SECONDS - start)) s"
fi

if [[ ("$step" == all || "$step" == fuzz) && "$fuzz_seconds" -gt 0 ]]; then
  "$GANTRY_ROOT/tests/fuzz/run_fuzzers.sh" "$build/tests/fuzz" "$fuzz_seconds"
fi
