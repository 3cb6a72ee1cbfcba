#!/bin/sh
# Compiler launcher of the precompiled-header hosts (cmake/precompiled_headers.cmake): before a
# compile that makes a precompiled header (-x c++-header ... -o X.gch) it removes the X.gch of the
# previous build, then runs the rest of its arguments (ccache, the compiler).
#
# The compile that makes X.gch passes `-include X`; with an old X.gch beside X, ccache takes it for
# a precompiled header this compile uses and hashes that file into the key. GCC's headers differ
# from build to build (addresses), so such a key is new every time: the header is compiled again,
# its bytes are new, and every unit that uses it misses the cache too. A clean clone (CI) never has
# an old X.gch, so a build directory that had one never filled the cache with what a clone looks up.
out=""
header=0
prev=""
for arg in "$@"; do
  [ "$prev" = "-o" ] && out="$arg"
  [ "$prev" = "-x" ] && [ "$arg" = "c++-header" ] && header=1
  prev="$arg"
done
if [ "$header" = 1 ] && [ -n "$out" ]; then rm -f "$out"; fi
exec "$@"
