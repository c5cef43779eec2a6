#!/usr/bin/env bash
# Builds the monoio peer of bench/run task into out/monoio-task; prints the binary path last.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
CARGO=$(command -v cargo || true)
[[ -z "$CARGO" && -x "$HOME/.cargo/bin/cargo" ]] && CARGO=$HOME/.cargo/bin/cargo
if [[ -z "$CARGO" ]]; then
    echo "monoio-task: Rust toolchain not found (need 'cargo' on PATH)" >&2
    exit 3
fi
mkdir -p out
"$CARGO" build --release --locked --target-dir out/target >&2
cp out/target/release/monoio-task out/monoio-task
echo "$PWD/out/monoio-task"
