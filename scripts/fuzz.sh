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
flags=(-std=c++20 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -I"$top/include")
sources=("$top/src/http/parser.cc" "$top/src/http/chunked.cc" "$top/src/http/websocket_frame.cc"
         "$top/src/http/websocket_utf8.cc")
for target in request response chunked websocket; do
  bin="$out/${target}_fuzz"
  "$cxx" "${flags[@]}" "${sources[@]}" "$top/tests/http/fuzz/${target}_fuzz.cc" -o "$bin"
  scratch="$out/corpus-$target"
  mkdir -p "$scratch"
  echo "fuzz: $target for ${seconds}s"
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    "$scratch" "$top/tests/http/fuzz/seeds/$target" 2>"$out/$target.log" \
    || { tail -40 "$out/$target.log" >&2; echo "fuzz: $target FAILED (log: $out/$target.log)" >&2; exit 1; }
  grep -E "stat::number_of_executed_units|stat::new_units_added" "$out/$target.log" | tr '\n' ' '; echo
done
# Shared-memory IPC: the control messages off the socket, and a buffer region the peer controls.
ipc_sources=("$top/src/ipc/wire.cc" "$top/src/ipc/region.cc" "$top/src/ipc/error.cc")
for target in control chain; do
  bin="$out/ipc_${target}_fuzz"
  "$cxx" "${flags[@]}" -I"$top/src" "${ipc_sources[@]}" "$top/tests/ipc/fuzz/${target}_fuzz.cc" -o "$bin"
  scratch="$out/corpus-ipc-$target"
  mkdir -p "$scratch"
  echo "fuzz: ipc $target for ${seconds}s"
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    "$scratch" "$top/tests/ipc/fuzz/seeds/$target" 2>"$out/ipc_$target.log" \
    || { tail -40 "$out/ipc_$target.log" >&2; echo "fuzz: ipc $target FAILED (log: $out/ipc_$target.log)" >&2; exit 1; }
  grep -E "stat::number_of_executed_units|stat::new_units_added" "$out/ipc_$target.log" | tr '\n' ' '; echo
done
# Native RPC: a stream of frames, each header checked and each payload decoded into messages.
rpc_sources=("$top/src/rpc/native/wire.cc" "$top/src/rpc/native/error.cc")
for target in frame; do
  bin="$out/rpc_${target}_fuzz"
  "$cxx" "${flags[@]}" -I"$top/src" "${rpc_sources[@]}" "$top/tests/rpc/fuzz/${target}_fuzz.cc" -o "$bin"
  scratch="$out/corpus-rpc-$target"
  mkdir -p "$scratch"
  echo "fuzz: rpc $target for ${seconds}s"
  "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    "$scratch" "$top/tests/rpc/fuzz/seeds/$target" 2>"$out/rpc_$target.log" \
    || { tail -40 "$out/rpc_$target.log" >&2; echo "fuzz: rpc $target FAILED (log: $out/rpc_$target.log)" >&2; exit 1; }
  grep -E "stat::number_of_executed_units|stat::new_units_added" "$out/rpc_$target.log" | tr '\n' ' '; echo
done
