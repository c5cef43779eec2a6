#!/usr/bin/env bash
# Builds the compio peer of bench/run task into out/compio-task; prints the binary path last.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
CARGO=$(command -v cargo || true)
[[ -z "$CARGO" && -x "$HOME/.cargo/bin/cargo" ]] && CARGO=$HOME/.cargo/bin/cargo
if [[ -z "$CARGO" ]]; then
    echo "compio-task: Rust toolchain not found (need 'cargo' on PATH)" >&2
    exit 3
fi
mkdir -p out
"$CARGO" build --release --locked --target-dir out/target >&2
cp out/target/release/compio-task out/compio-task
echo "$PWD/out/compio-task"
