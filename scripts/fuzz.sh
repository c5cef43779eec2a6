#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (-fsanitize=fuzzer,address,undefined) and runs each for
# SECONDS (default 60) from its seed corpus; any crash fails. New inputs go to a scratch corpus
# under build/fuzz, never into the repository's seeds. Every source is compiled once and the
# targets run JOBS at a time (default: the CPU count).
#   scripts/fuzz.sh [SECONDS]      (make test: 10 s each; make fuzz: 10 min each)
set -euo pipefail
seconds=${1:-60}
jobs=${JOBS:-$(nproc)}
top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out="$top/build/fuzz"
mkdir -p "$out/obj"
cxx=$(command -v clang++ || command -v clang++-14 || true)
if [ -z "$cxx" ]; then echo "fuzz: clang++ not found (scripts/deps.sh test installs clang)" >&2; exit 1; fi
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I"$top/include" -I"$top/src")

# The targets: NAME HARNESS SEEDS SOURCES (space-separated, relative to the tree).
http_sources="src/http/parser.cc src/http/chunked.cc src/http/websocket_frame.cc src/http/websocket_utf8.cc"
ipc_sources="src/ipc/wire.cc src/ipc/region.cc src/ipc/error.cc"
targets=(
  # HTTP: the request and response parsers, the chunked decoder, WebSocket frames.
  "request tests/http/fuzz/request_fuzz.cc tests/http/fuzz/seeds/request $http_sources"
  "response tests/http/fuzz/response_fuzz.cc tests/http/fuzz/seeds/response $http_sources"
  "chunked tests/http/fuzz/chunked_fuzz.cc tests/http/fuzz/seeds/chunked $http_sources"
  "websocket tests/http/fuzz/websocket_fuzz.cc tests/http/fuzz/seeds/websocket $http_sources"
  # HTTP: the Range field of static-file requests.
  "ranges tests/http/fuzz/ranges_fuzz.cc tests/http/fuzz/seeds/ranges src/http/ranges.cc $http_sources"
  # Shared-memory IPC: the control messages off the socket, and a buffer region the peer controls.
  "ipc_control tests/ipc/fuzz/control_fuzz.cc tests/ipc/fuzz/seeds/control $ipc_sources"
  "ipc_chain tests/ipc/fuzz/chain_fuzz.cc tests/ipc/fuzz/seeds/chain $ipc_sources"
  # Native RPC: a stream of frames, each header checked and each payload decoded into messages.
  "rpc_frame tests/rpc/fuzz/frame_fuzz.cc tests/rpc/fuzz/seeds/frame src/rpc/native/wire.cc src/rpc/native/error.cc"
  # Redis: replies off the connection.
  "redis_resp tests/redis/fuzz/resp_fuzz.cc tests/redis/fuzz/seeds/resp src/redis/resp.cc"
)

obj() { echo "$out/obj/$(echo "$1" | tr / _).o"; }

# 1. Compile every distinct source once, JOBS at a time.
compile() {
  "$cxx" "${flags[@]}" -c "$top/$1" -o "$(obj "$1")" 2>"$(obj "$1").log" ||
    { cat "$(obj "$1").log" >&2; echo "fuzz: compiling $1 FAILED" >&2; return 1; }
}
export -f compile obj
export cxx top out
export flags_str="${flags[*]}"
sources=$(for t in "${targets[@]}"; do echo "$t" | cut -d' ' -f2,4-; done | tr ' ' '\n' | sort -u)
# shellcheck disable=SC2016
echo "$sources" | xargs -P "$jobs" -I{} bash -c 'flags=($flags_str); compile "$1"' _ {} ||
  { echo "fuzz: build failed" >&2; exit 1; }

# 2. Link each target, then run JOBS targets at a time for SECONDS each.
run() {
  local name=$1 harness=$2 seeds=$3
  shift 3
  local bin="$out/${name}_fuzz" scratch="$out/corpus-$name" objs=("$(obj "$harness")")
  for s in "$@"; do objs+=("$(obj "$s")"); done
  "$cxx" "${flags[@]}" "${objs[@]}" -o "$bin" || { echo "fuzz: linking $name FAILED" >&2; return 1; }
  mkdir -p "$scratch"
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    "$scratch" "$top/$seeds" 2>"$out/$name.log" \
    || { tail -40 "$out/$name.log" >&2; echo "fuzz: $name FAILED (log: $out/$name.log)" >&2; return 1; }
  echo "fuzz: $name ${seconds}s: $(grep -E "stat::number_of_executed_units|stat::new_units_added" \
    "$out/$name.log" | tr '\n' ' ')"
}
export -f run
export seconds
printf '%s\n' "${targets[@]}" | xargs -P "$jobs" -L1 bash -c 'flags=($flags_str); run "$@"' _ ||
  { echo "fuzz: a target failed" >&2; exit 1; }
