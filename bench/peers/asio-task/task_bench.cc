// B9 peer: the task rows with standalone Asio's C++20 awaitables on a single-threaded
// io_context. Prints "workload asio value ns_per_op" ("asio-uring" when built with Asio's
// io_uring backend, -DASIO_HAS_IO_URING -DASIO_DISABLE_EPOLL); --quick runs 1/5 of the work.
// Every workload checks its result and exits 1 on a mismatch.
#include <asio.hpp>
#include <asio/experimental/channel.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

using asio::awaitable;
using asio::co_spawn;
using asio::use_awaitable;

namespace {

long g_scale = 5;
#if defined(ASIO_HAS_IO_URING)
constexpr const char* k_impl = "asio-uring";
#else
constexpr const char* k_impl = "asio";
#endif

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "asio-task: %s\n", what);
    std::exit(1);
}

template <typename F>
void bench(const char* name, long n, F&& fn) {
    n = n * g_scale / 5;
    fn(n / 10);
    auto t0 = std::chrono::steady_clock::now();
    long ops = fn(n);
    double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s %s %.2f ns_per_op\n", name, k_impl, ns / static_cast<double>(ops));
    std::fflush(stdout);
}

// Two coroutines take turns through the scheduler (Asio has no direct transfer).
long yield_pingpong(long n) {
    asio::io_context io(1);
    long count = 0;
    auto player = [&]() -> awaitable<void> {
        for (long i = 0; i < n; ++i) {
            ++count;
            co_await asio::post(io, use_awaitable);
        }
    };
    co_spawn(io, player(), asio::detached);
    co_spawn(io, player(), asio::detached);
    io.run();
    if (count != 2 * n) fail("yield: count mismatch");
    return 2 * n;
}

awaitable<long> empty(long i) { co_return i; }

long spawn_join(long n) {
    asio::io_context io(1);
    long sum = 0;
    co_spawn(io, [&]() -> awaitable<void> {
        for (long i = 0; i < n; ++i) sum += co_await co_spawn(io, empty(i), use_awaitable);
    }, asio::detached);
    io.run();
    if (sum != n * (n - 1) / 2) fail("spawn_join: sum mismatch");
    return n;
}

long await_call(long n) {
    asio::io_context io(1);
    long sum = 0;
    co_spawn(io, [&]() -> awaitable<void> {
        for (long i = 0; i < n; ++i) sum += co_await empty(i);
    }, asio::detached);
    io.run();
    if (sum != n * (n - 1) / 2) fail("await_call: sum mismatch");
    return n;
}

using chan = asio::experimental::channel<void(asio::error_code, long)>;

long chan_pingpong(long n) {
    asio::io_context io(1);
    chan ping(io, 0), pong(io, 0);
    long sum = 0;
    co_spawn(io, [&]() -> awaitable<void> {
        for (long i = 0; i < n; ++i) {
            long v = co_await ping.async_receive(use_awaitable);
            co_await pong.async_send(asio::error_code{}, v + 1, use_awaitable);
        }
    }, asio::detached);
    co_spawn(io, [&]() -> awaitable<void> {
        for (long i = 0; i < n; ++i) {
            co_await ping.async_send(asio::error_code{}, i, use_awaitable);
            sum += co_await pong.async_receive(use_awaitable);
        }
    }, asio::detached);
    io.run();
    if (sum != n * (n + 1) / 2) fail("chan: sum mismatch");
    return n;
}

}  // namespace

int main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--quick") == 0)
            g_scale = 1;
        else
            fail("usage: asio-task [--quick]");
    }
    bench("yield", 20'000'000, yield_pingpong);
    bench("spawn_join", 5'000'000, spawn_join);
    bench("await_call", 20'000'000, await_call);
    bench("chan_pingpong", 5'000'000, chan_pingpong);
    return 0;
}
