#!/usr/bin/env bash
# Builds the plain-C epoll echo server into out/echo_server.
# Extra flags can be passed via CFLAGS, e.g. CFLAGS=-DECHO_EDGE_TRIGGERED=0
# for the level-triggered variant.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$here/out"
# shellcheck disable=SC2086
"${CC:-cc}" -O2 -Wall -Wextra ${CFLAGS:-} -o "$here/out/echo_server" "$here/echo_server.c"
echo "$here/out/echo_server"
