#!/usr/bin/env bash
# Configures (once) and builds gantry incrementally into $GANTRY_BUILD_DIR. Extra args go to cmake configure.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
launcher="$(gantry_ccache_launcher)"
# Configured when new, when extra arguments are given, and when the launcher changed since (its
# digest is kept beside the cache).
digest="$(printf '%s' "$launcher" | sha256sum | cut -c1-16)"
if [[ ! -f "$GANTRY_BUILD_DIR/CMakeCache.txt" || $# -gt 0 ||
      "$(cat "$GANTRY_BUILD_DIR/gantry-configure.digest" 2>/dev/null)" != "$digest" ]]; then
  # Ninja where the build directory is new (an existing one keeps the generator it was made with).
  generator=()
  [[ -f "$GANTRY_BUILD_DIR/CMakeCache.txt" ]] || generator=(-G Ninja)
  cmake -S "$GANTRY_ROOT" -B "$GANTRY_BUILD_DIR" "${generator[@]}" -DCMAKE_BUILD_TYPE="$GANTRY_BUILD_TYPE" \
    "-DCMAKE_CXX_COMPILER_LAUNCHER=$launcher" "$@" >/dev/null
  echo "$digest" >"$GANTRY_BUILD_DIR/gantry-configure.digest"
fi
# The build lists each test program's tests by running it (gtest_discover_tests); a LibTorch program
# set this way starts once instead of re-executing itself to set it (workers/gan/openmp_wait_policy.h).
OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}" cmake --build "$GANTRY_BUILD_DIR" -j "$GANTRY_JOBS"
# The web app gantry-server serves with --web-root: type-checked and bundled (clients/web/build.mjs,
# a no-op when nothing changed since the last build).
node "$GANTRY_ROOT/clients/web/build.mjs" "$GANTRY_BUILD_DIR/web"
