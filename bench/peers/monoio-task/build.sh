#!/usr/bin/env bash
# Builds the monoio peer of bench/run task into out/monoio-task; prints the binary path last.
exec bash "$(dirname "${BASH_SOURCE[0]}")/../cargo_peer.sh" "$(dirname "${BASH_SOURCE[0]}")"
