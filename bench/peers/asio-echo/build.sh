#!/usr/bin/env bash
# Builds the standalone-Asio echo server into out/asio-echo (epoll reactor)
# and, when <liburing.h> is available, the same source with Asio's io_uring
# backend into out/asio-echo-uring (-DASIO_HAS_IO_URING -DASIO_DISABLE_EPOLL,
# linked with -luring; checked to build and pass the echo client with Asio
# 1.22.1 and liburing 2.3).  Prints the epoll binary's path last; the uring
# binary, if built, is next to it.
# Needs the standalone (non-Boost) Asio headers, e.g. Debian's libasio-dev.
# Extra flags can be passed via CXXFLAGS.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CXX=${CXX:-c++}
if ! command -v "$CXX" >/dev/null; then
    echo "asio-echo: C++ compiler '$CXX' not found (set CXX)" >&2
    exit 3
fi
has_header() {
    echo "#include <$1>" | "$CXX" -std=c++20 -x c++ -E - >/dev/null 2>&1
}
if ! has_header asio.hpp; then
    echo "asio-echo: standalone Asio header <asio.hpp> not found (Debian/Ubuntu: libasio-dev)" >&2
    exit 3
fi
mkdir -p "$here/out"
flags=(-O2 -std=c++20 -pthread -Wall -Wextra)
# shellcheck disable=SC2086
"$CXX" "${flags[@]}" ${CXXFLAGS:-} -o "$here/out/asio-echo" "$here/echo_server.cc"
if has_header liburing.h; then
    # shellcheck disable=SC2086
    "$CXX" "${flags[@]}" ${CXXFLAGS:-} -DASIO_HAS_IO_URING -DASIO_DISABLE_EPOLL \
        -o "$here/out/asio-echo-uring" "$here/echo_server.cc" -luring
else
    echo "asio-echo: <liburing.h> not found (liburing-dev): skipping out/asio-echo-uring" >&2
fi
echo "$here/out/asio-echo"
