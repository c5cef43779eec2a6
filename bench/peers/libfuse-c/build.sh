#!/usr/bin/env bash
# Builds the libfuse3 passthrough of bench/run httpfs into out/passthrough (libfuse3-dev).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$here/out"
"${CC:-cc}" -O2 -Wall -Wextra -o "$here/out/passthrough" "$here/passthrough.c" $(pkg-config --cflags --libs fuse3)
echo "$here/out/passthrough"
