#!/usr/bin/env bash
# Run on the build machine before the device checks: unpacks Debian's Abseil and OpenSSL (headers,
# CMake config, shared libraries) into var/gpu-prefix, which the GPU machine lacks and cannot fetch.
# Carry var/gpu-prefix there with the checkout (about 14 MB); tests/gpu/run.sh finds it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
prefix="${GANTRY_GPU_PREFIX:-$PWD/var/gpu-prefix}"
debs="$PWD/var/gpu-debs"
packages=(libabsl-dev libabsl20220623 libssl-dev libssl3)
rm -rf "$prefix" && mkdir -p "$prefix" "$debs"
(cd "$debs" && rm -f ./*.deb && apt-get download "${packages[@]}" >/dev/null)
for deb in "$debs"/*.deb; do dpkg -x "$deb" "$prefix"; done
# Documentation and the arch-independent bits nobody reads there.
rm -rf "$prefix/usr/share"
# Shared libraries only (Abseil's CMake config names the .so files).
find "$prefix" -name "*.a" -delete
echo "prepared $prefix ($(du -sh "$prefix" | cut -f1)): ${packages[*]}"
