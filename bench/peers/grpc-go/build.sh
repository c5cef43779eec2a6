#!/usr/bin/env bash
# Builds the grpc-go echo server (google.golang.org/grpc) into out/grpc-go; prints
# the binary path last. Needs the module (go.sum pins it) in the module cache or
# from the Go module proxy.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
GO=$(command -v go || true)
[[ -z "$GO" && -x /usr/local/go/bin/go ]] && GO=/usr/local/go/bin/go
if [[ -z "$GO" ]]; then
    echo "grpc-go: Go toolchain not found (need 'go' on PATH)" >&2
    exit 3
fi
mkdir -p out
"$GO" build -trimpath -o out/grpc-go .
echo "$PWD/out/grpc-go"
