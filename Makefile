# gluon: the two commands a newcomer needs are `make demo` and `make test`.
JOBS ?= $(shell nproc)
CMAKE_COMMON := -G Ninja

.PHONY: all build release demo test test-dev test-asan test-tsan fuzz bench clean

all: build

build:
	@scripts/deps.sh build
	cmake --preset dev >/dev/null
	cmake --build --preset dev -j $(JOBS)

release:
	@scripts/deps.sh build
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS)

## demo: a directory served by gluon's HTTP server and by nginx under the same load, side by side
## (then gluon's echo server beside a plain epoll server).
demo: release
	@scripts/deps.sh bench
	bench/run demo

## test: the whole suite in a normal build, then under ASan+UBSan, then the programs whose
## threads share memory under TSan.
test: test-dev test-asan test-tsan

test-dev:
	@scripts/deps.sh test
	cmake --preset dev >/dev/null
	cmake --build --preset dev -j $(JOBS)
	GLUON_REQUIRE_PEERS=1 ctest --preset dev
	bench/run runtime --quick
	bench/run io --quick
	bench/run connrate --quick
	bench/run http --quick
	bench/run ipc --quick
	bench/run rpc --quick
	bench/run redis --quick
	bench/run preload --quick
	bench/run task --quick
	bench/run httpfs --quick
	scripts/fuzz.sh 10

test-asan:
	@scripts/deps.sh test
	cmake --preset asan >/dev/null
	cmake --build --preset asan -j $(JOBS)
	GLUON_REQUIRE_PEERS=1 ctest --preset asan

test-tsan:
	@scripts/deps.sh test
	cmake --preset tsan >/dev/null
	cmake --build --preset tsan -j $(JOBS)
	GLUON_REQUIRE_PEERS=1 ctest --preset tsan

## fuzz: each libFuzzer target (HTTP request, response, chunked, Range; WebSocket frames; IPC control messages, region; RPC frames; Redis replies) for 10 minutes.
fuzz:
	@scripts/deps.sh test
	scripts/fuzz.sh 600

bench: release
	@scripts/deps.sh bench
	bench/run all

clean:
	rm -rf build
