#!/usr/bin/env bash
# Builds the shmipc-go peer (module github.com/cloudwego/shmipc-go v0.2.0, through the Go module
# proxy) into OUTDIR (default out/)/shmipc-peer; prints the binary path last. Exit 3: no Go
# toolchain.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
GO=$(command -v go || true)
[[ -z "$GO" && -x /usr/local/go/bin/go ]] && GO=/usr/local/go/bin/go
if [[ -z "$GO" ]]; then
    echo "shmipc-peer: Go toolchain not found (need 'go' on PATH)" >&2
    exit 3
fi
out=${1:-$PWD/out}
mkdir -p "$out"
"$GO" build -trimpath -buildvcs=false -o "$out/shmipc-peer" .
echo "$out/shmipc-peer"
