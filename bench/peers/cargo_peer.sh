#!/usr/bin/env bash
# Builds the Rust peer in DIR (a crate whose binary is named after DIR) into DIR/out; prints the
# binary's path last. Exit 3 without a Rust toolchain (bench/run reports the peer as not run).
#   cargo_peer.sh DIR
set -euo pipefail
cd "$1"
name=$(basename "$PWD")
CARGO=$(command -v cargo || true)
[[ -z "$CARGO" && -x "$HOME/.cargo/bin/cargo" ]] && CARGO=$HOME/.cargo/bin/cargo
if [[ -z "$CARGO" ]]; then
    echo "$name: Rust toolchain not found (need 'cargo' on PATH)" >&2
    exit 3
fi
mkdir -p out
"$CARGO" build --release --locked --target-dir out/target >&2
cp "out/target/release/$name" "out/$name"
echo "$PWD/out/$name"
