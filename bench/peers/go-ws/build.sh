#!/usr/bin/env bash
# Builds the Go WebSocket echo server (gorilla/websocket) into out/go-ws; prints
# the binary path last. Needs the module (go.sum pins it) in the module cache or
# from the Go module proxy.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
GO=$(command -v go || true)
[[ -z "$GO" && -x /usr/local/go/bin/go ]] && GO=/usr/local/go/bin/go
if [[ -z "$GO" ]]; then
    echo "go-ws: Go toolchain not found (need 'go' on PATH)" >&2
    exit 3
fi
mkdir -p out
"$GO" build -trimpath -o out/go-ws .
echo "$PWD/out/go-ws"
