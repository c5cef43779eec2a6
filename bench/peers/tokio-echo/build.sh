#!/usr/bin/env bash
# Builds the Tokio echo server into out/tokio-echo; prints the binary path last.
exec bash "$(dirname "${BASH_SOURCE[0]}")/../cargo_peer.sh" "$(dirname "${BASH_SOURCE[0]}")"
