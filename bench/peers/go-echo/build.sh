#!/usr/bin/env bash
# Builds the Go net-package echo server into out/go-echo; prints the binary
# path last.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
GO=$(command -v go || true)
[[ -z "$GO" && -x /usr/local/go/bin/go ]] && GO=/usr/local/go/bin/go
if [[ -z "$GO" ]]; then
    echo "go-echo: Go toolchain not found (need 'go' on PATH)" >&2
    exit 3
fi
mkdir -p out
"$GO" build -trimpath -o out/go-echo .
echo "$PWD/out/go-echo"
