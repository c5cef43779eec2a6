#!/usr/bin/env bash
# Installs the Debian 12 packages gluon needs to build, test and benchmark; installs only what is
# missing. Usage: scripts/deps.sh [build|test|bench]
set -euo pipefail

profile=${1:-build}
pkgs=(cmake ninja-build g++ pkg-config liburing-dev libfmt-dev libgtest-dev libgmock-dev)
case "$profile" in
  build) ;;
  test) pkgs+=(gdb valgrind) ;;
  bench) pkgs+=(libboost-context-dev libasio-dev fio nginx-light) ;;
  *) echo "usage: $0 [build|test|bench]" >&2; exit 2 ;;
esac
pkgs+=(libcurl4-openssl-dev)  # gluon::curl (src/net/curl)
if [ "$profile" = test ]; then pkgs+=(nginx-light); fi  # the peer of tests/net/curl_test
pkgs+=(libssl-dev)  # gluon::tls (src/net/tls)
pkgs+=(libnghttp2-dev)  # HTTP/2 framing (src/http/h2)
pkgs+=(libfuse3-dev fuse3)  # gluon::fs_fuse (src/fs/fuse); fusermount3 mounts for non-root users
if [ "$profile" = test ]; then pkgs+=(fio); fi  # an unmodified program on the mounts of tests/fs/fuse_test
if [ "$profile" != build ]; then pkgs+=(nghttp2-client); fi  # h2load, the HTTP/2 peer and load generator
if [ "$profile" = test ]; then pkgs+=(openssl curl); fi  # the peers of tests/net/tls_test
if [ "$profile" != build ]; then pkgs+=(wrk); fi  # the load generator of bench/run http
if [ "$profile" = test ]; then pkgs+=(clang libclang-rt-14-dev); fi  # libFuzzer (scripts/fuzz.sh)
if [ "$profile" = test ]; then pkgs+=(python3-websockets python3-prometheus-client); fi  # WebSocket peer, metrics parser
if [ "$profile" != build ]; then pkgs+=(redis-server); fi  # the server of tests/redis and bench/run redis
if [ "$profile" = bench ]; then pkgs+=(libhiredis-dev); fi  # the hiredis peer of bench/run redis
if [ "$profile" = test ]; then pkgs+=(iperf); fi  # iperf 2, the unmodified threaded program of tests/preload
if [ "$profile" != build ]; then pkgs+=(libprotobuf-dev protobuf-compiler libgrpc++-dev protobuf-compiler-grpc); fi  # gRPC C++, the peer of tests/rpc

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "gluon: missing packages: ${missing[*]}" >&2
  echo "gluon: run as root, or: sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "gluon: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
