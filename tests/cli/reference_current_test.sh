#!/usr/bin/env bash
# docs/CLI.md must be exactly what `gantry reference` prints: the CLI reference cannot drift from
# the command table. usage: reference_current_test.sh GANTRY_BINARY DOCS_CLI_MD
set -euo pipefail
gantry="$1"
doc="$2"
if ! diff -u "$doc" <("$gantry" reference); then
  echo "docs/CLI.md differs from 'gantry reference' (above: - the file, + the command table)." >&2
  echo "Regenerate it: <build>/clients/cli/gantry reference > docs/CLI.md" >&2
  exit 1
fi
echo "docs/CLI.md matches 'gantry reference' ($(grep -c '^### gantry ' "$doc") commands)"
