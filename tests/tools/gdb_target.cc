// Target program for gdb_test.sh (tools/gluon-gdb.py). Two vCPUs:
//   vCPU 0 (main thread): fibers "alpha", "beta" and "gamma" park in park_here_<name>; "epsilon"
//     is spawned but never runs; then the main fiber stops in gdb_breakpoint_here() and aborts.
//   vCPU 1 (a second thread): its main fiber parks in park_here_vcpu1_main, which runs fiber
//     "delta"; delta parks in park_here_delta and the thread idles in the event loop on delta's
//     stack, so delta is the vCPU's current fiber while its saved context is stale.
//   Tasks on vCPU 0: outer_task awaits inner_task, which sleeps; a detached lone_task sleeps.
// Built with -O0 -g so that every park_here_* frame is visible.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu.h"
#include "gluon/task/io.h"
#include "gluon/task/spawn.h"

namespace {

using namespace std::chrono_literals;

std::atomic<bool> g_delta_parked{false};

[[gnu::noinline]] void park() { (void)gluon::this_fiber::sleep_for(1h); }

[[gnu::noinline]] void park_here_alpha() { park(); }
[[gnu::noinline]] void park_here_beta() { park(); }
[[gnu::noinline]] void park_here_gamma() { park(); }
[[gnu::noinline]] void park_here_vcpu1_main() { park(); }

[[gnu::noinline]] void park_here_delta() {
    g_delta_parked.store(true);
    park();
}

gluon::task<int> inner_task() {
    (void)co_await gluon::co::sleep_for(1h);
    co_return 1;
}
gluon::task<int> outer_task() { co_return co_await inner_task(); }
gluon::task<void> lone_task() { (void)co_await gluon::co::sleep_for(1h); }

void spawn_or_die(const char* name, void (*fn)()) {
    auto f = gluon::spawn({.name = name}, fn);
    if (!f) {
        std::fprintf(stderr, "gdb_target: spawning %s failed\n", name);
        std::exit(2);
    }
    (void)f->detach();
}

void second_vcpu() {
    if (!gluon::init({.log_engine = false})) std::exit(2);
    spawn_or_die("delta", park_here_delta);
    park_here_vcpu1_main();
}

}  // namespace

extern "C" [[gnu::noinline]] void gdb_breakpoint_here() { asm volatile("" ::: "memory"); }

int main() {
    if (!gluon::init({.log_engine = false})) return 2;
    spawn_or_die("alpha", park_here_alpha);
    spawn_or_die("beta", park_here_beta);
    spawn_or_die("gamma", park_here_gamma);
    auto outer = gluon::co_spawn(outer_task());
    auto lone = gluon::co_spawn(lone_task());
    if (!outer || !lone) return 2;
    lone->detach();
    gluon::this_fiber::yield();  // alpha, beta, gamma and the task runner run until they park
    std::thread(second_vcpu).detach();
    while (!g_delta_parked.load()) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(50ms);  // let vCPU 1 reach its event loop
    spawn_or_die("epsilon", park_here_alpha);  // ready, not started: nobody yields again
    gdb_breakpoint_here();
    std::abort();
}
