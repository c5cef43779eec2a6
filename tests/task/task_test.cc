// task<T>, spawning and joining, on every engine.
#include "gluon/task/task.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "gluon/runtime/fiber.h"
#include "gluon/runtime/runtime.h"
#include "gluon/task/io.h"
#include "gluon/task/spawn.h"
#include "test_support.h"

namespace gluon {
namespace {

using namespace std::chrono_literals;

class task_test : public test::engine_test {};

task<int> forty_two() { co_return 42; }
task<int> add(int a, int b) { co_return a + b; }
task<void> nothing() { co_return; }
task<int> thrower() {
    throw std::runtime_error("boom");
    co_return 0;
}
task<long> depth(int n) {
    if (n == 0) co_return 0;
    co_return 1 + co_await depth(n - 1);
}
task<std::string> words() {
    std::string s = "a";
    for (int i = 0; i < 3; ++i) s += std::to_string(co_await add(i, 1));
    co_return s;
}

// Runs loop(&stop) as a task on this vCPU while a fiber of the same vCPU waits for it to start
// and then sets stop: the loop ends only if the fiber gets a turn. Returns the loop's value.
template <typename Loop>
long until_a_fiber_stops_it(Loop loop) {
    bool started = false, stop = false;
    auto f = spawn([&] {
        while (!started) this_fiber::yield();
        stop = true;
    });
    if (!f) return -1;
    auto body = [](Loop l, bool* started, const bool* stop) -> task<long> {
        *started = true;
        co_return co_await l(stop);
    };
    const long n = block_on(body(loop, &started, &stop)).value();
    (void)f->join();
    return n;
}

TEST_P(task_test, value_void_and_nested) {
    EXPECT_EQ(block_on(forty_two()).value(), 42);
    EXPECT_TRUE(block_on(nothing()).has_value());
    EXPECT_EQ(block_on(words()).value(), "a123");
}

TEST_P(task_test, exception_reaches_the_awaiter_and_the_joiner) {
    auto outer = []() -> task<std::string> {
        try {
            co_await thrower();
        } catch (const std::runtime_error& e) {
            co_return e.what();
        }
        co_return "no exception";
    };
    EXPECT_EQ(block_on(outer()).value(), "boom");
    auto h = co_spawn(thrower());
    ASSERT_TRUE(h);
    EXPECT_THROW(h->join(), std::runtime_error);
}

TEST_P(task_test, result_values_pass_through) {
    auto t = []() -> task<result<int>> { co_return errno_error(ENOENT); };
    auto r = block_on(t());
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().value(), ENOENT);
}

TEST_P(task_test, a_million_nested_awaits_use_no_stack) {
    // Symmetric transfer: a chain this deep would overflow a fiber's 256 KiB stack otherwise.
    // Where GCC does not make the transfer a tail call (this test is built without
    // optimisation in Debug builds, and under the sanitizers), deep transfers go through the
    // task runner instead (task.h).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    constexpr long n = 100'000;  // the sanitizers' frame allocations are slow
#else
    constexpr long n = 1'000'000;
#endif
    EXPECT_EQ(block_on(depth(n)).value(), n);
}

TEST_P(task_test, a_loop_of_awaits_that_end_at_once_runs_in_constant_stack) {
    // Every await transfers to a task that ends at once and transfers back: in a Debug or
    // sanitizer build each round trip would nest frames, and 100,000 of them would overflow
    // the runner's stack.
    auto loop = []() -> task<long> {
        long s = 0;
        for (int i = 0; i < 100'000; ++i) s += co_await add(i, 1);
        co_return s;
    };
    EXPECT_EQ(block_on(loop()).value(), 100'000L * 100'001L / 2);
}

TEST_P(task_test, a_loop_joining_tasks_that_have_ended_runs_in_constant_stack) {
    // A join of a task that has ended goes on at once: in a Debug or sanitizer build each one
    // nested a frame, and 10,000 of them overflowed the runner's stack. Both kinds of join.
    auto loop = []() -> task<long> {
        constexpr int n = 50'000;
        std::vector<join_handle<int>> hs;
        for (int i = 0; i < 2 * n; ++i) hs.push_back(co_spawn(add(i, 1)).value());
        co_await co::yield();  // queued behind every child: they have all ended when it resumes
        long s = 0;
        for (int i = 0; i < n; ++i) s += co_await hs[i];
        for (int i = n; i < 2 * n; ++i) s += (co_await hs[i].join_for_async(1h)).value();
        co_return s;
    };
    EXPECT_EQ(block_on(loop()).value(), 100'000L * 100'001L / 2);
}

TEST_P(task_test, spawned_tasks_are_joined_from_tasks) {
    auto parent = []() -> task<int> {
        std::vector<join_handle<int>> hs;
        for (int i = 0; i < 100; ++i) hs.push_back(co_spawn(add(i, i)).value());
        int sum = 0;
        for (auto& h : hs) sum += co_await h;
        co_return sum;
    };
    EXPECT_EQ(block_on(parent()).value(), 9900);
}

TEST_P(task_test, a_task_that_spawns_and_awaits_in_a_loop_lets_fibers_run) {
    // A task awaited right after its spawn starts at once, without the runner's queue; fibers
    // of the vCPU must still get their turns, or this loop never ends (in an optimised build:
    // where transfers nest frames, the depth guard sends some through the queue as well).
    EXPECT_GT(until_a_fiber_stops_it([](const bool* stop) -> task<long> {
                  long n = 0;
                  while (!*stop) n += co_await co_spawn(add(1, 0)).value();
                  co_return n;
              }),
              0);
}

TEST_P(task_test, detached_tasks_run_to_their_end) {
    int done = 0;
    auto bump = [](int* d) -> task<void> {
        co_await co::yield();
        ++*d;
    };
    for (int i = 0; i < 10; ++i) co_spawn(bump(&done))->detach();
    auto wait = [](int* d) -> task<void> {
        while (*d < 10) co_await co::yield();
    };
    ASSERT_TRUE(block_on(wait(&done)));
    EXPECT_EQ(done, 10);
}

TEST_P(task_test, a_task_that_only_computes_and_yields_sees_its_cancellation) {
    // It makes no other operation that could fail: its yield must say it is cancelled, or a
    // cancel's join, and fini, wait for it for ever.
    auto spin = [](long* rounds, int* err) -> task<int> {
        for (;;) {
            ++*rounds;
            if (auto y = co_await co::yield(); !y) co_return *err = y.error().value();
        }
    };
    long ra = 0, rb = 0;
    int ea = 0, eb = 0;
    auto h = co_spawn(spin(&ra, &ea)).value();
    co_spawn(spin(&rb, &eb))->detach();
    while (ra < 100 || rb < 100) this_fiber::yield();
    h.cancel();
    EXPECT_EQ(h.join(), ECANCELED);
    ASSERT_TRUE(fini().has_value());  // returns once the detached one has ended
    EXPECT_EQ(eb, ECANCELED);
}

TEST_P(task_test, a_plain_thread_and_another_vcpu_join_tasks) {
    auto rt = runtime::start(test::test_runtime(2, GetParam()));
    ASSERT_TRUE(rt);
    // Spawned on vCPU 0 from this (non-vCPU) thread, joined here.
    auto h = co_spawn(add(20, 22), {.on = (*rt)->vcpu(0)});
    ASSERT_TRUE(h);
    EXPECT_EQ(h->join(), 42);
    // A task on vCPU 1 spawns on vCPU 0 and awaits it.
    auto r = (*rt)->call(1, [&] {
        auto remote = [](vcpu_handle other) -> task<int> {
            auto child = co_spawn(forty_two(), {.on = other}).value();
            co_return co_await child + current_vcpu_index() * 0;
        };
        return block_on(remote((*rt)->vcpu(0))).value();
    });
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, 42);
}

// A join with a timeout: a task that ends in time gives its value; one that does not is
// cancelled and has ended (its sleep cut short) by the time the join fails. From a task, from
// this fiber, and across vCPUs.
task<int> sleeper(duration d, int* ended) {
    auto r = co_await co::sleep_for(d);
    *ended = r ? 1 : 2;  // 2: the sleep was cancelled
    co_return 7;
}

TEST_P(task_test, joins_with_a_timeout_cancel_a_late_task_and_wait_for_its_end) {
    int ended = 0;
    auto quick = co_spawn(sleeper(0ms, &ended)).value();
    auto r = quick.join_for(10s);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(*r, 7);
    EXPECT_EQ(ended, 1);
    EXPECT_FALSE(quick.joinable());

    ended = 0;
    auto slow = co_spawn(sleeper(1h, &ended)).value();
    r = slow.join_for(1ms);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::timed_out);
    EXPECT_EQ(ended, 2);  // cancelled and ended before join_for returned
    EXPECT_FALSE(slow.joinable());

    auto from_task = [](int* e1, int* e2) -> task<int> {
        auto a = co_spawn(sleeper(0ms, e1)).value();
        auto ra = co_await a.join_for_async(10s);
        auto b = co_spawn(sleeper(1h, e2)).value();
        auto rb = co_await b.join_for_async(1ms);
        co_return (ra && *ra == 7 ? 1 : 0) + (!rb && rb.error() == std::errc::timed_out ? 10 : 0);
    };
    int e1 = 0, e2 = 0;
    EXPECT_EQ(block_on(from_task(&e1, &e2)).value(), 11);
    EXPECT_EQ(e1, 1);
    EXPECT_EQ(e2, 2);

    // The late task on another vCPU, its joiner a task here.
    auto rt = runtime::start(test::test_runtime(1, GetParam()));
    ASSERT_TRUE(rt);
    auto across = [](vcpu_handle other, int* e) -> task<int> {
        auto c = co_spawn(sleeper(1h, e), {.on = other}).value();
        auto rc = co_await c.join_for_async(1ms);
        co_return !rc && rc.error() == std::errc::timed_out ? 1 : 0;
    };
    int e3 = 0;
    EXPECT_EQ(block_on(across((*rt)->vcpu(0), &e3)).value(), 1);
    EXPECT_EQ(e3, 2);
}

// Records the thread that destroys it (a moved-from one records nothing).
struct destroyed_on {
    std::thread::id* where;
    explicit destroyed_on(std::thread::id* w) noexcept : where(w) {}
    destroyed_on(destroyed_on&& o) noexcept : where(std::exchange(o.where, nullptr)) {}
    ~destroyed_on() {
        if (where) *where = std::this_thread::get_id();
    }
};
task<int> holds(destroyed_on) { co_return 7; }
task<destroyed_on> late_value(std::thread::id* where) {
    (void)co_await co::sleep_for(1h);  // cut short by the join's timeout
    co_return destroyed_on(where);
}

// A spawned task's frame, and with it its parameters, is destroyed on the task's vCPU whoever
// joins it: a parameter may belong to that vCPU (a co::pooled_buffer gives its buffer back to
// that vCPU's engine). So is a value a join that timed out drops. Joined from a plain thread,
// from this vCPU's thread, from a fiber and from a task of another vCPU.
TEST_P(task_test, a_task_frame_is_destroyed_on_its_vcpu_whoever_joins_it) {
    auto rt = runtime::start(test::test_runtime(2, GetParam()));
    ASSERT_TRUE(rt);
    const vcpu_handle v0 = (*rt)->vcpu(0);
    const std::thread::id home = (*rt)->call(0, [] { return std::this_thread::get_id(); }).value();
    const std::thread::id none;

    std::thread::id param, value;
    int got = 0;
    long timed_out = 0;
    std::thread([&] {
        got = co_spawn(holds(destroyed_on(&param)), {.on = v0}).value().join();
        auto late = co_spawn(late_value(&value), {.on = v0}).value();
        auto r = late.join_for(1ms);
        timed_out = !r && r.error() == std::errc::timed_out;
    }).join();
    EXPECT_EQ(got, 7);
    EXPECT_EQ(param, home) << "parameter destroyed on the joining plain thread";
    EXPECT_TRUE(timed_out);
    EXPECT_EQ(value, home) << "dropped value destroyed on the joining plain thread";

    param = value = none;
    EXPECT_EQ(co_spawn(holds(destroyed_on(&param)), {.on = v0}).value().join(), 7);
    EXPECT_EQ(param, home) << "parameter destroyed on the joining vCPU";
    EXPECT_FALSE(co_spawn(late_value(&value), {.on = v0}).value().join_for(1ms));
    EXPECT_EQ(value, home) << "dropped value destroyed on the joining vCPU";

    param = none;
    ASSERT_TRUE((*rt)->run(1, [&] {
        got = co_spawn(holds(destroyed_on(&param)), {.on = v0}).value().join();
    }));
    EXPECT_EQ(got, 7);
    EXPECT_EQ(param, home) << "parameter destroyed on the joining fiber's vCPU";

    param = value = none;
    auto r = (*rt)->call(1, [&] {
        auto joiner = [](vcpu_handle other, std::thread::id* p, std::thread::id* v) -> task<int> {
            const int a = co_await co_spawn(holds(destroyed_on(p)), {.on = other}).value();
            auto late = co_spawn(late_value(v), {.on = other}).value();
            auto b = co_await late.join_for_async(1ms);
            co_return a + (!b && b.error() == std::errc::timed_out ? 10 : 0);
        };
        return block_on(joiner(v0, &param, &value)).value();
    });
    ASSERT_TRUE(r);
    EXPECT_EQ(*r, 17);
    EXPECT_EQ(param, home) << "parameter destroyed on the awaiting task's vCPU";
    EXPECT_EQ(value, home) << "dropped value destroyed on the awaiting task's vCPU";
}

// A task spawned from a call that runs in fini()'s last look at the vCPU's inbox, after the
// task runner has gone: it runs and ends before fini returns, and the thread keeps no runner of
// the vCPU that is gone (a later vCPU on it runs tasks).
TEST_P(task_test, a_task_spawned_while_its_vcpu_finishes_runs_and_ends) {
    struct post : vcpu_call {
        bool ran = false;
    } p;
    p.fn = [](vcpu_call* c) noexcept {
        auto mark = [](bool* ran) -> task<void> {
            *ran = true;
            co_return;
        };
        auto h = co_spawn(mark(&static_cast<post*>(c)->ran));
        if (h) h->detach();
    };
    ASSERT_TRUE(block_on(nothing()));  // the runner exists, and ends in fini
    ASSERT_TRUE(post_call(vcpu_handle::current(), p));
    ASSERT_TRUE(fini());
    ASSERT_TRUE(p.ran);
    init_options o;
    o.engine = GetParam();
    o.log_engine = false;
    ASSERT_TRUE(init(o));
    EXPECT_EQ(block_on(forty_two()).value(), 42);
}

// A task spawned onto a vCPU that cannot start it (its task runner's fiber cannot be made: here
// the vCPU is in the last rounds of its fini and makes no more fibers) ends there without
// running, its frame destroyed on that vCPU, and its join gets the error, whichever kind of
// join it is; it was left unended, and its joiners waited for ever. A spawn there from that
// vCPU itself fails with the same error (it said EPERM).
task<result<int>> result_holds(destroyed_on) { co_return 7; }

TEST_P(task_test, a_task_its_vcpu_cannot_start_ends_there_and_its_join_gets_why) {
    auto rt = runtime::start(test::test_runtime(1, GetParam()));
    ASSERT_TRUE(rt);
    struct state : vcpu_call {
        runtime* other = nullptr;
        vcpu_handle home;
        std::error_code refused, spawn_here;
        std::atomic<bool> joining{false};  // the other vCPU has spawned here and awaits the tasks
        std::thread::id where[3];
        std::promise<int> got[3];
    } s;
    std::future<int> got[3];
    for (int i = 0; i < 3; ++i) got[i] = s.got[i].get_future();
    s.other = rt->get();
    s.home = vcpu_handle::current();
    s.fn = [](vcpu_call* c) noexcept {
        auto* s = static_cast<state*>(c);
        // Each run starts a fiber and posts itself again: fini goes round after round until
        // the vCPU makes no more fibers.
        auto f = spawn([] {});
        if (f) {
            (void)f->detach();
            (void)post_call(s->home, *s);
            return;
        }
        s->refused = f.error();
        s->spawn_here = co_spawn(forty_two()).error();
        // Three tasks of the other vCPU spawn a task here each and await it, each its own way;
        // a fourth, queued behind them, says when all three wait (their starts and joins are
        // posted here by then).
        (void)s->other->post(0, [s] {
            auto by_value = [](state* s) -> task<void> {
                auto h = co_spawn(result_holds(destroyed_on(&s->where[0])), {.on = s->home}).value();
                auto r = co_await h;
                s->got[0].set_value(r ? 0 : r.error().value());
            };
            auto with_timeout = [](state* s) -> task<void> {
                auto h = co_spawn(holds(destroyed_on(&s->where[1])), {.on = s->home}).value();
                auto r = co_await h.join_for_async(1h);
                s->got[1].set_value(r ? 0 : r.error().value());
            };
            auto thrown = [](state* s) -> task<void> {
                try {
                    auto h = co_spawn(holds(destroyed_on(&s->where[2])), {.on = s->home}).value();
                    (void)co_await h;
                    s->got[2].set_value(0);
                } catch (const std::system_error& e) {
                    s->got[2].set_value(e.code().value());
                }
            };
            auto all_wait = [](state* s) -> task<void> {
                s->joining.store(true);
                s->joining.notify_all();
                co_return;
            };
            co_spawn(by_value(s))->detach();
            co_spawn(with_timeout(s))->detach();
            co_spawn(thrown(s))->detach();
            co_spawn(all_wait(s))->detach();
        });
        s->joining.wait(false);
    };
    ASSERT_TRUE(post_call(vcpu_handle::current(), s));
    ASSERT_TRUE(fini());
    EXPECT_EQ(s.refused, errno_code(ESHUTDOWN));
    EXPECT_EQ(s.spawn_here, errno_code(ESHUTDOWN));
    const std::thread::id home = std::this_thread::get_id();
    for (int i = 0; i < 3; ++i) {
        ASSERT_EQ(got[i].wait_for(10s), std::future_status::ready) << "join " << i << " waits";
        EXPECT_EQ(got[i].get(), ESHUTDOWN) << "join " << i;
        EXPECT_EQ(s.where[i], home) << "frame " << i << " not destroyed on its vCPU";
    }
}

// Handles kept after their tasks' runtime stopped: that vCPU's fini cancelled the tasks and ran
// them to their ends, and a join, cancel or drop of a handle afterwards is answered here. They
// were posted to the vCPU that had gone (into freed memory): the join waited for ever.
task<int> asleep_until_cancelled() {
    auto r = co_await co::sleep_for(1h);
    co_return r ? 0 : r.error().value();
}

TEST_P(task_test, a_handle_outlives_the_vcpu_of_its_task) {
    auto rt = runtime::start(test::test_runtime(1, GetParam()));
    ASSERT_TRUE(rt);
    const vcpu_handle there = (*rt)->vcpu(0);
    auto joined = co_spawn(asleep_until_cancelled(), {.on = there}).value();
    auto cancelled = co_spawn(asleep_until_cancelled(), {.on = there}).value();
    auto awaited = co_spawn(asleep_until_cancelled(), {.on = there}).value();
    auto dropped = co_spawn(asleep_until_cancelled(), {.on = there}).value();
    ASSERT_TRUE((*rt)->run(0, [] {}));  // after their starts: they sleep
    rt->reset();
    EXPECT_EQ(joined.join(), ECANCELED);
    cancelled.cancel();
    EXPECT_EQ(cancelled.join_for(1h).value(), ECANCELED);
    auto await = [](join_handle<int>* h) -> task<int> { co_return co_await *h; };
    EXPECT_EQ(block_on(await(&awaited)).value(), ECANCELED);
    dropped.detach();
}

TEST_P(task_test, nop_round_trips) {
    auto t = []() -> task<long> {
        long sum = 0;
        for (int i = 0; i < 1000; ++i) sum += co_await co::nop();
        co_return sum;
    };
    EXPECT_EQ(block_on(t()).value(), 0);
}

TEST_P(task_test, a_loop_of_operations_that_complete_at_once_lets_fibers_run) {
    // io_uring: a nop completes during its submission, found by the runner's look before it
    // parks; fibers of the vCPU must still get their turns however fast that goes round.
    // (epoll answers a nop without suspending at all.)
    if (GetParam() == engine::kind::epoll) GTEST_SKIP() << "epoll's nop never suspends";
    EXPECT_GT(until_a_fiber_stops_it([](const bool* stop) -> task<long> {
                  long n = 0;
                  while (!*stop) n += 1 + co_await co::nop();
                  co_return n;
              }),
              0);
}

TEST_P(task_test, sleep_waits) {
    auto t = []() -> task<int64_t> {
        const int64_t t0 = mono_now_ns();
        auto r = co_await co::sleep_for(std::chrono::milliseconds(20));
        EXPECT_TRUE(r);
        co_return mono_now_ns() - t0;
    };
    EXPECT_GE(block_on(t()).value(), 20'000'000);
}

GLUON_ENGINE_TEST_SUITE(task_test);

}  // namespace
}  // namespace gluon
