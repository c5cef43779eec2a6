#!/usr/bin/env bash
# Builds the hiredis load generator of bench/run redis into out/redis_load (libhiredis-dev).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$here/out"
"${CC:-cc}" -O2 -Wall -Wextra -o "$here/out/redis_load" "$here/redis_load.c" -lhiredis
echo "$here/out/redis_load"
