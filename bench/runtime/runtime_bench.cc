// gluon runtime micro-benchmarks: the same workloads as bench/peers/{go,tokio}-runtime and
// boost-context, with the same output protocol ("<workload> <ns_per_op>" per line).
//
//   switch           ns per switch: two fibers ping-pong with this_fiber::yield()
//   create_join      ns to spawn an empty fiber (pooled stack) and join it
//   chan_local       ns per message: ping-pong over two unbuffered channels, one vCPU
//   chan_cross       the same with the two fibers on two vCPUs (two cores)
//   chan_cross@limit the floor for chan_cross on this machine: ns per one-way hop of one cache
//                    line between two threads pinned to cores 0 and 1 (no runtime at all)
//   mutex_contended  ns per lock/unlock: 4 fibers, a yield inside every 16th critical section
//   scale            N fibers (100,000; --fibers N) each blocked in sleep: ns to create one, and
//                    resident bytes per fiber (lines carry a third field naming the metric)
//
// Every workload checks its own result and exits 1 on a mismatch. --quick runs 1/5 of the work.
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "gluon/runtime/fiber.h"
#include "gluon/runtime/runtime.h"
#include "gluon/sync.h"

using namespace gluon;

namespace {

long g_scale = 5;  // 5 = full, 1 = quick
long g_fibers = 100'000;

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "runtime_bench: %s\n", what);
    std::exit(1);
}

template <typename F>
void bench(const char* name, long n, F&& fn) {
    n = n * g_scale / 5;
    fn(n / 10);  // warm-up: stacks pooled, caches hot
    int64_t t0 = mono_now_ns();
    long ops = fn(n);
    int64_t el = mono_now_ns() - t0;
    std::printf("%s %.1f\n", name, static_cast<double>(el) / static_cast<double>(ops));
    std::fflush(stdout);
}

long switch_bench(long n) {
    long count = 0;
    auto body = [&] {
        for (long i = 0; i < n; ++i) {
            ++count;
            this_fiber::yield();
        }
    };
    auto a = spawn(body);
    auto b = spawn(body);
    if (!a || !b || !a->join() || !b->join()) fail("switch: spawn/join failed");
    if (count != 2 * n) fail("switch: wrong count");
    return 2 * n;
}

long create_join_bench(long n) {
    long ran = 0;
    for (long i = 0; i < n; ++i) {
        auto f = spawn([&ran] { ++ran; });
        if (!f || !f->join()) fail("create_join: spawn/join failed");
    }
    if (ran != n) fail("create_join: wrong count");
    return n;
}

// Two fibers exchange n round trips over two unbuffered channels; returns messages (2n).
long chan_pingpong(long n, runtime* rt) {
    channel<long> ping, pong;
    long sum = 0;
    auto pinger = [&] {
        for (long i = 0; i < n; ++i) {
            if (!ping.send(i)) fail("chan: send failed");
            auto r = pong.recv();
            if (!r || *r != i) fail("chan: wrong value");
            sum += *r;
        }
    };
    auto ponger = [&] {
        for (long i = 0; i < n; ++i) {
            auto r = ping.recv();
            if (!r || !pong.send(*r)) fail("chan: echo failed");
        }
    };
    if (rt) {
        latch done(2);
        (void)rt->post(0, [&] { pinger(); done.count_down(); });
        (void)rt->post(1, [&] { ponger(); done.count_down(); });
        if (!done.wait()) fail("chan_cross: wait failed");
    } else {
        auto a = spawn(pinger);
        auto b = spawn(ponger);
        if (!a || !b || !a->join() || !b->join()) fail("chan_local: spawn/join failed");
    }
    if (sum != n * (n - 1) / 2) fail("chan: checksum mismatch");
    return 2 * n;
}

long mutex_bench(long n) {
    mutex m;
    long counter = 0;
    const long per = n / 4;
    std::vector<fiber> fs;
    for (int t = 0; t < 4; ++t)
        fs.push_back(*spawn([&] {
            for (long i = 0; i < per; ++i) {
                std::lock_guard g(m);
                ++counter;
                if ((i & 15) == 0) this_fiber::yield();
            }
        }));
    for (auto& f : fs)
        if (!f.join()) fail("mutex: join failed");
    if (counter != 4 * per) fail("mutex: counter mismatch");
    return 4 * per;
}

void pin_to_cpu(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) fail("cannot pin a thread");
}

// Two threads on cores 0 and 1 pass a counter back and forth through one cache line each way:
// what a message between cores costs with nothing but the hardware involved.
long line_hop_bench(long n) {
    alignas(64) static std::atomic<long> ping{0};
    alignas(64) static std::atomic<long> pong{0};
    ping.store(0);
    pong.store(0);
    std::thread echo([n] {
        pin_to_cpu(1);
        for (long i = 1; i <= n; ++i) {
            while (ping.load(std::memory_order_acquire) != i) __builtin_ia32_pause();
            pong.store(i, std::memory_order_release);
        }
    });
    pin_to_cpu(0);
    for (long i = 1; i <= n; ++i) {
        ping.store(i, std::memory_order_release);
        while (pong.load(std::memory_order_acquire) != i) __builtin_ia32_pause();
    }
    echo.join();
    return 2 * n;
}

long rss_bytes() {
    FILE* f = std::fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (!f || std::fscanf(f, "%ld %ld", &pages, &resident) != 2) fail("cannot read /proc/self/statm");
    std::fclose(f);
    return resident * 4096;
}

// All fibers sleep until one common deadline, so they are all alive and blocked at once.
void scale_bench(long n) {
    std::vector<fiber> fs;
    fs.reserve(static_cast<size_t>(n));
    long woke = 0;
    const long rss0 = rss_bytes();
    const deadline_t wake_at = deadline_after(std::chrono::hours(1));
    const int64_t t0 = mono_now_ns();
    for (long i = 0; i < n; ++i) {
        auto f = spawn([&] {
            if (this_fiber::sleep_until(wake_at).error() == std::errc::operation_canceled) ++woke;
        });
        if (!f) fail("scale: spawn failed (vm.max_map_count? memory?)");
        fs.push_back(std::move(*f));
    }
    this_fiber::yield();  // every new fiber runs up to its sleep before main runs again
    const int64_t created = mono_now_ns() - t0;
    const long rss1 = rss_bytes();
    std::printf("scale_create_%ld %.1f ns_per_op\n", n, static_cast<double>(created) / static_cast<double>(n));
    std::printf("scale_rss_per_fiber_%ld %.0f bytes\n", n, static_cast<double>(rss1 - rss0) / static_cast<double>(n));
    std::fflush(stdout);
    for (auto& f : fs) (void)f.interrupt();
    for (auto& f : fs)
        if (!f.join()) fail("scale: join failed");
    if (woke != n) fail("scale: not every fiber was blocked in its sleep");
}

}  // namespace

int main(int argc, char** argv) {
    const char* only = nullptr;
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--quick") == 0)
            g_scale = 1;
        else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (std::strcmp(argv[i], "--fibers") == 0 && i + 1 < argc)
            g_fibers = std::atol(argv[++i]);
        else {
            std::fprintf(stderr, "usage: runtime_bench [--quick] [--only WORKLOAD] [--fibers N]\n");
            return 2;
        }
    }
    auto want = [&](const char* w) { return !only || std::strcmp(only, w) == 0; };
    if (!init({.log_engine = false})) fail("init failed");
    if (want("switch")) bench("switch", 20'000'000, switch_bench);
    if (want("create_join")) bench("create_join", 5'000'000, create_join_bench);
    if (want("chan_local")) bench("chan_local", 5'000'000, [](long n) { return chan_pingpong(n, nullptr); });
    if (want("mutex_contended")) bench("mutex_contended", 10'000'000, mutex_bench);
    if (want("scale")) scale_bench(g_fibers);
    (void)fini();
    if (want("chan_cross")) {
        runtime_options o;
        o.vcpus = 2;
        o.vcpu.log_engine = false;
        auto rt = runtime::start(o);
        if (!rt) fail("runtime start failed");
        bench("chan_cross", 500'000, [&](long n) { return chan_pingpong(n, rt->get()); });
    }
    if (want("chan_cross") && std::thread::hardware_concurrency() >= 2)
        bench("chan_cross@limit", 2'000'000, line_hop_bench);
    return 0;
}
