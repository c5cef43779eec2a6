#!/usr/bin/env bash
# Builds the Boost.Context peer into out/boost-context; prints the binary path last.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
CXX=${CXX:-g++}
if ! command -v "$CXX" >/dev/null; then
    echo "boost-context: C++ compiler '$CXX' not found" >&2
    exit 3
fi
if ! echo '#include <boost/context/detail/fcontext.hpp>' | "$CXX" -x c++ -E - >/dev/null 2>&1; then
    echo "boost-context: Boost.Context headers not found (Debian: libboost-context-dev)" >&2
    exit 3
fi
mkdir -p out
"$CXX" -O2 -std=c++20 -Wall -Wextra -o out/boost-context main.cpp -lboost_context
echo "$PWD/out/boost-context"
