#!/usr/bin/env bash
# Installs the Debian packages gantry needs, only those missing; quiet when everything is present.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
missing=()
for p in "${GANTRY_APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
