#!/usr/bin/env bash
# Builds the compio peer of bench/run task into out/compio-task; prints the binary path last.
exec bash "$(dirname "${BASH_SOURCE[0]}")/../cargo_peer.sh" "$(dirname "${BASH_SOURCE[0]}")"
