#!/usr/bin/env bash
# Builds the Asio C++20-awaitables peer of bench/run task into out/asio-task and, where
# <liburing.h> is there, the same source on Asio's io_uring backend into out/asio-task-uring
# (as bench/peers/asio-echo does); prints the first one's path last. Needs the standalone Asio
# headers (Debian: libasio-dev).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CXX=${CXX:-c++}
if ! echo "#include <asio.hpp>" | "$CXX" -std=c++20 -x c++ -E - >/dev/null 2>&1; then
    echo "asio-task: standalone Asio header <asio.hpp> not found (Debian/Ubuntu: libasio-dev)" >&2
    exit 3
fi
mkdir -p "$here/out"
# shellcheck disable=SC2086
"$CXX" -O2 -std=c++20 -pthread -Wall -Wextra ${CXXFLAGS:-} -o "$here/out/asio-task" "$here/task_bench.cc"
if echo "#include <liburing.h>" | "$CXX" -std=c++20 -x c++ -E - >/dev/null 2>&1; then
    # shellcheck disable=SC2086
    "$CXX" -O2 -std=c++20 -pthread -Wall -Wextra ${CXXFLAGS:-} -DASIO_HAS_IO_URING -DASIO_DISABLE_EPOLL \
        -o "$here/out/asio-task-uring" "$here/task_bench.cc" -luring
else
    rm -f "$here/out/asio-task-uring"
fi
echo "$here/out/asio-task"
