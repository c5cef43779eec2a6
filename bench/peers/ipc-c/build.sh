#!/usr/bin/env bash
# Builds the plain-C floor of the IPC ping-pong (shared memory with spinning, and a Unix
# socket) into out/ipc_floor.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$here/out"
"${CC:-cc}" -O2 -Wall -Wextra -o "$here/out/ipc_floor" "$here/ipc_floor.c"
echo "$here/out/ipc_floor"
