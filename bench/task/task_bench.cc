// B9: C++20 tasks against gluon's own fibers on the same vCPU. Prints one line per cell:
// "workload impl value metric". Every workload checks its own result and exits 1 on a
// mismatch. --quick runs 1/5 of the work. See bench/README.md.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "gluon/runtime/fd.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/runtime.h"
#include "gluon/sync/channel.h"
#include "gluon/task/io.h"
#include "gluon/task/spawn.h"
#include "gluon/task/sync.h"
#include "gluon/task/task.h"

using namespace gluon;

namespace {

long g_scale = 5;
const char* g_only = nullptr;

[[noreturn]] void fail(const char* what) {
    std::fprintf(stderr, "task_bench: %s\n", what);
    std::exit(1);
}

// Times fn(n) after a warm-up of n/10; fn returns how many operations it did.
template <typename F>
void bench(const char* workload, const char* impl, long n, F&& fn) {
    if (g_only && std::strcmp(g_only, workload) != 0 && std::string(workload) + "/" + impl != g_only) return;
    n = n * g_scale / 5;
    fn(n / 10);
    const int64_t t0 = mono_now_ns();
    const long ops = fn(n);
    const int64_t el = mono_now_ns() - t0;
    std::printf("%s %s %.2f ns_per_op\n", workload, impl, static_cast<double>(el) / static_cast<double>(ops));
    std::fflush(stdout);
}

// ---- switch: two tasks hand control to each other by symmetric transfer -------------------

struct baton {
    std::coroutine_handle<> waiting;  // the other player, suspended
};
struct pass {
    baton* b;
    bool await_ready() const noexcept { return false; }
    std::coroutine_handle<> await_suspend(std::coroutine_handle<> h) noexcept {
        std::coroutine_handle<> next = b->waiting;
        b->waiting = h;
        return next;
    }
    void await_resume() const noexcept {}
};

task<void> player(baton* b, long n, long* count) {
    for (long i = 0; i < n; ++i) {
        ++*count;
        co_await pass{b};
    }
}

long task_switch(long n) {
    long count = 0;
    auto driver = [](long nn, long* c) -> task<void> {
        // The other player starts when the driver first passes to it, and ends when the
        // driver awaits it after the last pass.
        baton b;
        auto other = player(&b, nn, c).release();
        b.waiting = other;
        for (long i = 0; i < nn; ++i) {
            ++*c;
            co_await pass{&b};
        }
        co_await task<void>(other);
    };
    (void)block_on(driver(n, &count));
    if (count != 2 * n) fail("switch: count mismatch");
    return 2 * n;
}

// Two tasks take turns through the task runner's queue (what a runtime without direct
// transfer does for a switch).
long task_yield(long n) {
    long count = 0;
    auto player = [](long nn, long* c) -> task<void> {
        for (long i = 0; i < nn; ++i) {
            ++*c;
            co_await co::yield();
        }
    };
    auto a = co_spawn(player(n, &count)).value();
    auto b = co_spawn(player(n, &count)).value();
    a.join();
    b.join();
    if (count != 2 * n) fail("yield: count mismatch");
    return 2 * n;
}

long fiber_switch(long n) {
    long count = 0;
    auto body = [&] {
        for (long i = 0; i < n; ++i) {
            ++count;
            this_fiber::yield();
        }
    };
    auto a = spawn(body), b = spawn(body);
    (void)a->join();
    (void)b->join();
    if (count != 2 * n) fail("fiber switch: count mismatch");
    return 2 * n;
}

// ---- spawn+join, and an awaited call ---------------------------------------------------------

task<long> empty(long i) { co_return i; }

long task_spawn_join(long n) {
    auto t = [](long nn) -> task<long> {
        long s = 0;
        for (long i = 0; i < nn; ++i) s += co_await co_spawn(empty(i)).value();
        co_return s;
    };
    if (block_on(t(n)).value() != n * (n - 1) / 2) fail("spawn_join: sum mismatch");
    return n;
}

long task_await_call(long n) {
    auto t = [](long nn) -> task<long> {
        long s = 0;
        for (long i = 0; i < nn; ++i) s += co_await empty(i);
        co_return s;
    };
    if (block_on(t(n)).value() != n * (n - 1) / 2) fail("await_call: sum mismatch");
    return n;
}

long fiber_spawn_join(long n) {
    long s = 0;
    for (long i = 0; i < n; ++i) {
        auto f = spawn([&s, i] { s += i; });
        (void)f->join();
    }
    if (s != n * (n - 1) / 2) fail("fiber spawn_join: sum mismatch");
    return n;
}

// ---- channel ping-pong (unbuffered channels, one round trip = 2 messages) ----------------------

long task_chan(long n) {
    channel<long> ping(0), pong(0);
    auto server = [](channel<long>* in, channel<long>* out, long nn) -> task<void> {
        for (long i = 0; i < nn; ++i) {
            auto v = co_await co::recv(*in);
            (void)co_await co::send(*out, *v + 1);
        }
    };
    auto client = [](channel<long>* out, channel<long>* in, long nn) -> task<long> {
        long s = 0;
        for (long i = 0; i < nn; ++i) {
            (void)co_await co::send(*out, i);
            s += *co_await co::recv(*in);
        }
        co_return s;
    };
    auto srv = co_spawn(server(&ping, &pong, n)).value();
    const long s = block_on(client(&ping, &pong, n)).value();
    srv.join();
    if (s != n * (n + 1) / 2) fail("chan: sum mismatch");
    return n;
}

long fiber_chan(long n) {
    channel<long> ping(0), pong(0);
    auto srv = spawn([&] {
        for (long i = 0; i < n; ++i) (void)pong.send(*ping.recv() + 1);
    });
    long s = 0;
    for (long i = 0; i < n; ++i) {
        (void)ping.send(i);
        s += *pong.recv();
    }
    (void)srv->join();
    if (s != n * (n + 1) / 2) fail("fiber chan: sum mismatch");
    return n;
}

// ---- io_uring nop round trip: one op in flight (batch 1) or 32 ----------------------------------

task<long> nop_loop(long n) {
    long bad = 0;
    for (long i = 0; i < n; ++i) bad += (co_await co::nop()) != 0;
    co_return bad;
}

long task_nop(long n, int batch) {
    std::vector<join_handle<long>> hs;
    for (int b = 0; b < batch; ++b) hs.push_back(co_spawn(nop_loop(n / batch)).value());
    long bad = 0;
    for (auto& h : hs) bad += h.join();
    if (bad) fail("nop: an op failed");
    return n / batch * batch;
}

long fiber_nop(long n, int batch) {
    long bad = 0;
    std::vector<fiber> fs;
    for (int b = 0; b < batch; ++b)
        fs.push_back(spawn([&bad, n, batch] {
            for (long i = 0; i < n / batch; ++i) {
                engine::io_op op;
                bad += run_op(op) != 0;
            }
        }).value());
    for (auto& f : fs) (void)f.join();
    if (bad) fail("fiber nop: an op failed");
    return n / batch * batch;
}

// ---- cross-vCPU message: a task on vCPU 1 and one on vCPU 0 ping-pong over channels -------------

long task_cross(runtime& rt, long n) {
    channel<long> ping(0), pong(0);
    auto server = [](channel<long>* in, channel<long>* out, long nn) -> task<void> {
        for (long i = 0; i < nn; ++i) (void)co_await co::send(*out, *co_await co::recv(*in) + 1);
    };
    auto client = [](channel<long>* out, channel<long>* in, long nn) -> task<long> {
        long s = 0;
        for (long i = 0; i < nn; ++i) {
            (void)co_await co::send(*out, i);
            s += *co_await co::recv(*in);
        }
        co_return s;
    };
    auto srv = co_spawn(server(&ping, &pong, n), {.on = rt.vcpu(0)}).value();
    auto cl = co_spawn(client(&ping, &pong, n), {.on = rt.vcpu(1)}).value();
    const long s = cl.join();
    srv.join();
    if (s != n * (n + 1) / 2) fail("cross: sum mismatch");
    return n;
}

}  // namespace

int main(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--quick") == 0)
            g_scale = 1;
        else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            g_only = argv[++i];
        else {
            std::fprintf(stderr, "usage: task_bench [--quick] [--only WORKLOAD[/IMPL]]\n");
            return 2;
        }
    }
    auto on_vcpu = [](engine::kind k, auto&& fn) {
        if (!engine::available(k)) return;
        if (!init({.engine = k, .log_engine = false})) fail("init failed");
        fn(k == engine::kind::io_uring ? "-io_uring" : "-epoll");
        (void)fini();
    };
    on_vcpu(engine::kind::io_uring, [](const char*) {
        bench("switch", "gluon-task", 50'000'000, task_switch);
        bench("switch", "gluon-fiber", 20'000'000, fiber_switch);
        bench("yield", "gluon-task", 20'000'000, task_yield);
        bench("yield", "gluon-fiber", 20'000'000, fiber_switch);
        bench("spawn_join", "gluon-task", 20'000'000, task_spawn_join);
        bench("spawn_join", "gluon-fiber", 5'000'000, fiber_spawn_join);
        bench("await_call", "gluon-task", 50'000'000, task_await_call);
        bench("chan_pingpong", "gluon-task", 5'000'000, task_chan);
        bench("chan_pingpong", "gluon-fiber", 5'000'000, fiber_chan);
        bench("nop_b1", "gluon-task", 5'000'000, [](long n) { return task_nop(n, 1); });
        bench("nop_b1", "gluon-fiber", 5'000'000, [](long n) { return fiber_nop(n, 1); });
        bench("nop_b32", "gluon-task", 20'000'000, [](long n) { return task_nop(n, 32); });
        bench("nop_b32", "gluon-fiber", 20'000'000, [](long n) { return fiber_nop(n, 32); });
    });
    if (std::thread::hardware_concurrency() >= 2) {
        // cross_vcpu_asleep: the idle spin off, so every message wakes a vCPU asleep in the
        // kernel (its floor: bench/task/wake_floor.c).
        for (unsigned spin_us : {50u, 0u}) {
            auto rt = runtime::start(
                {.vcpus = 2, .pin = true, .vcpu = {.idle_spin_us = spin_us, .log_engine = false}});
            if (!rt) fail("runtime start failed");
            bench(spin_us ? "cross_vcpu" : "cross_vcpu_asleep", "gluon-task", spin_us ? 1'000'000 : 20'000,
                  [&](long n) { return task_cross(**rt, n); });
        }
    }
    return 0;
}
