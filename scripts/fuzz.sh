#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (-fsanitize=fuzzer,address,undefined) and runs each for
# SECONDS (default 60) from its seed corpus; any crash fails. New inputs go to a scratch corpus
# under build/fuzz, never into the repository's seeds.
#   scripts/fuzz.sh [SECONDS]      (make test: 10 s each; make fuzz: 10 min each)
set -euo pipefail
seconds=${1:-60}
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$top/build/fuzz"
mkdir -p "$out"
cxx=$(command -v clang++ || command -v clang++-14 || true)
if [ -z "$cxx" ]; then echo "fuzz: clang++ not found (scripts/deps.sh test installs clang)" >&2; exit 1; fi
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I"$top/include" -I"$top/src")

# fuzz NAME HARNESS SEEDS SOURCES...: builds HARNESS with SOURCES, runs it from SEEDS for SECONDS.
fuzz() {
  local name=$1 harness=$2 seeds=$3
  shift 3
  local bin="$out/${name}_fuzz" scratch="$out/corpus-$name"
  "$cxx" "${flags[@]}" "$@" "$harness" -o "$bin"
  mkdir -p "$scratch"
  echo "fuzz: $name for ${seconds}s"
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    "$scratch" "$seeds" 2>"$out/$name.log" \
    || { tail -40 "$out/$name.log" >&2; echo "fuzz: $name FAILED (log: $out/$name.log)" >&2; exit 1; }
  grep -E "stat::number_of_executed_units|stat::new_units_added" "$out/$name.log" | tr '\n' ' '; echo
}

# HTTP: the request and response parsers, the chunked decoder, WebSocket frames.
http_sources=("$top/src/http/parser.cc" "$top/src/http/chunked.cc" "$top/src/http/websocket_frame.cc"
              "$top/src/http/websocket_utf8.cc")
for target in request response chunked websocket; do
  fuzz "$target" "$top/tests/http/fuzz/${target}_fuzz.cc" "$top/tests/http/fuzz/seeds/$target" "${http_sources[@]}"
done
# Shared-memory IPC: the control messages off the socket, and a buffer region the peer controls.
ipc_sources=("$top/src/ipc/wire.cc" "$top/src/ipc/region.cc" "$top/src/ipc/error.cc")
for target in control chain; do
  fuzz "ipc_$target" "$top/tests/ipc/fuzz/${target}_fuzz.cc" "$top/tests/ipc/fuzz/seeds/$target" "${ipc_sources[@]}"
done
# Native RPC: a stream of frames, each header checked and each payload decoded into messages.
rpc_sources=("$top/src/rpc/native/wire.cc" "$top/src/rpc/native/error.cc")
fuzz rpc_frame "$top/tests/rpc/fuzz/frame_fuzz.cc" "$top/tests/rpc/fuzz/seeds/frame" "${rpc_sources[@]}"
# Redis: replies off the connection.
fuzz redis_resp "$top/tests/redis/fuzz/resp_fuzz.cc" "$top/tests/redis/fuzz/seeds/resp" "$top/src/redis/resp.cc"
