#!/usr/bin/env bash
# `gantry completion bash`, sourced in a real bash: completions of commands, subcommands, flags
# (the command's own and the global ones), a flag's value skipped, files for positionals, and an
# unsupported shell refused with exit code 2.
set -uo pipefail
gantry="$1"
failures=0

source <("$gantry" completion bash) || { echo "FAIL: the script does not source"; exit 1; }

# complete WORD... : sets COMPREPLY as bash would for the command line "gantry WORD..." with the
# cursor at the end of the last word.
complete_line() {
  COMP_WORDS=(gantry "$@")
  COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
  COMPREPLY=()
  _gantry
}

# expect DESCRIPTION "EXPECTED WORDS (sorted)" WORD...
expect() {
  local what="$1" expected="$2"
  shift 2
  complete_line "$@"
  local got
  got="$(printf '%s\n' "${COMPREPLY[@]}" | sort | xargs)"
  if [[ "$got" != "$expected" ]]; then
    echo "FAIL: $what: 'gantry $*' completes to '$got', expected '$expected'"
    failures=$((failures + 1))
  else
    echo "ok: $what"
  fi
}

# expect_has DESCRIPTION WORD_THAT_MUST_BE_OFFERED WORD...
expect_has() {
  local what="$1" wanted="$2"
  shift 2
  complete_line "$@"
  if [[ " ${COMPREPLY[*]} " != *" $wanted "* ]]; then
    echo "FAIL: $what: 'gantry $*' does not offer '$wanted' (got: ${COMPREPLY[*]})"
    failures=$((failures + 1))
  else
    echo "ok: $what"
  fi
}

expect "top-level commands starting with j" "jobs" j
expect "top-level commands starting with co" "completion config costs" co
expect "subcommands of jobs starting with s" "submit" jobs s
expect "subcommands of datasets" "$( "$gantry" help datasets | awk '/^gantry datasets/ {print $3}' | sort | xargs)" datasets ""
expect_has "flags of jobs submit" --epochs jobs submit --
expect_has "global flags with a command" --server jobs submit --
expect "flags of jobs submit starting with --wa" "--wait" jobs submit --wa
expect "a flag's value is skipped" "submit" jobs --server 127.0.0.1:1 s
expect "global flags before a command" "--server" --ser
expect_has "the version flag" --version --

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
touch "$tmp/spec-file.yaml"
expect "files for a positional" "$tmp/spec-file.yaml" datasets upload "$tmp/spec-"

out="$("$gantry" completion zsh 2>&1)"
code=$?
if [[ $code -ne 2 || "$out" != *"supported: bash"* ]]; then
  echo "FAIL: 'gantry completion zsh' exits $code with: $out"
  failures=$((failures + 1))
else
  echo "ok: unsupported shell refused"
fi

if ((failures > 0)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "all completions as expected"
