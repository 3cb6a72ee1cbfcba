#!/usr/bin/env bash
# `--version` on every gantry binary: exit code 0, "NAME VERSION (COMMIT)" then a "build: " line, and
# nothing else happens (gantry-server needs no --db for it, gantry-worker no subcommand). COMMIT is
# the configured one's format (a binary not rebuilt since the last commit still shows its own).
# Usage: version_test.sh VERSION COMMIT BINARY...
set -uo pipefail
version=$1 commit=$2
shift 2
failures=0
for binary in "$@"; do
  name=$(basename "$binary")
  out=$("$binary" --version 2>&1)
  code=$?
  first=$(printf '%s\n' "$out" | sed -n 1p)
  second=$(printf '%s\n' "$out" | sed -n 2p)
  if [[ $code -ne 0 ]]; then
    echo "FAIL $name --version exited $code: $out"
    failures=$((failures + 1))
  elif [[ ! "$first" =~ ^"$name $version ("([0-9a-f]{7,40}|unknown)")"$ ]]; then
    echo "FAIL $name --version first line: '$first', expected like '$name $version ($commit)'"
    failures=$((failures + 1))
  elif [[ "$second" != "build: "* ]]; then
    echo "FAIL $name --version second line: '$second', expected 'build: ...'"
    failures=$((failures + 1))
  else
    echo "ok   $name: $first / $second"
  fi
done
# Also after other flags (and a subcommand for the CLI).
out=$("$1" --json --version 2>&1) || { echo "FAIL $(basename "$1") --json --version: $out"; failures=$((failures + 1)); }
exit $((failures > 0))
