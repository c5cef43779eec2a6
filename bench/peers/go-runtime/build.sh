#!/usr/bin/env bash
# Builds the Go goroutine peer into out/go-runtime; prints the binary path last.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
GO=$(command -v go || true)
[[ -z "$GO" && -x /usr/local/go/bin/go ]] && GO=/usr/local/go/bin/go
if [[ -z "$GO" ]]; then
    echo "go-runtime: Go toolchain not found (need 'go' on PATH)" >&2
    exit 3
fi
mkdir -p out
GOFLAGS=-mod=mod "$GO" build -o out/go-runtime .
echo "$PWD/out/go-runtime"
