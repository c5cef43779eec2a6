#!/usr/bin/env bash
# Builds the plain-C epoll HTTP responder into out/http_responder.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mkdir -p "$here/out"
"${CC:-cc}" -O2 -Wall -Wextra -o "$here/out/http_responder" "$here/http_responder.c"
echo "$here/out/http_responder"
