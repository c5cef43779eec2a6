#!/usr/bin/env bash
# Builds the Tokio WebSocket echo server (tokio-tungstenite) into out/tokio-ws; prints the binary
# path last.
exec bash "$(dirname "${BASH_SOURCE[0]}")/../cargo_peer.sh" "$(dirname "${BASH_SOURCE[0]}")"
