#!/usr/bin/env bash
# Installs gluon into a temporary prefix and builds a program against it twice: with CMake's
# find_package(gluon) and with pkg-config. Both must link and run.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
# Exit status: 0 pass, 1 failure, 77 skip (no pkg-config or no c++ compiler).
set -u
if [ $# -ne 2 ]; then
    echo "usage: $0 BUILD_DIR SOURCE_DIR" >&2
    exit 1
fi
build=$1
src=$2/tests/tools/consumer
command -v pkg-config >/dev/null || { echo "SKIP: pkg-config is not installed"; exit 77; }
command -v c++ >/dev/null || { echo "SKIP: no c++ compiler"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; fail "cmake --install"; }

cmake -S "$src" -B "$tmp/cmake" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$tmp/prefix" >"$tmp/configure.log" 2>&1 ||
    { cat "$tmp/configure.log" >&2; fail "find_package(gluon)"; }
cmake --build "$tmp/cmake" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log" >&2; fail "building with find_package"; }
[ "$("$tmp/cmake/consumer")" = ok ] || fail "the find_package build does not run"

libdir=$(dirname "$(find "$tmp/prefix" -name gluon.pc | head -1)")
[ -n "$libdir" ] || fail "gluon.pc is not installed"
flags=$(PKG_CONFIG_PATH=$libdir pkg-config --cflags --libs gluon) || fail "pkg-config gluon"
# shellcheck disable=SC2086
c++ -O1 "$src/main.cc" -o "$tmp/consumer_pc" $flags 2>"$tmp/pc.log" ||
    { cat "$tmp/pc.log" >&2; fail "building with pkg-config's flags"; }
[ "$("$tmp/consumer_pc")" = ok ] || fail "the pkg-config build does not run"
echo "PASS: find_package and pkg-config"
