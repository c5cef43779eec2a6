#!/usr/bin/env bash
# Builds the Tokio peer into out/tokio-runtime; prints the binary path last.
exec bash "$(dirname "${BASH_SOURCE[0]}")/../cargo_peer.sh" "$(dirname "${BASH_SOURCE[0]}")"
