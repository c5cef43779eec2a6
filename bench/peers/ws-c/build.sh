#!/usr/bin/env bash
# Builds the plain-C epoll WebSocket echo floor into out/ws_echo (OpenSSL's SHA-1 for the
# handshake: libssl-dev).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$here/out"
"${CC:-cc}" -O2 -Wall -Wextra -o "$here/out/ws_echo" "$here/ws_echo.c" -lcrypto
echo "$here/out/ws_echo"
