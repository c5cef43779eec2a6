#include "gluon/std_compat/future.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "gluon/std.h"
#include "support/half_speed_clock.h"
#include "test_support.h"

namespace gluon {
namespace {

namespace conc = std_compat;
using namespace std::chrono_literals;
using gluon::test::half_speed_clock;

class std_compat_future_test : public test::engine_test {};
GLUON_ENGINE_TEST_SUITE(std_compat_future_test);

// The code of the std::future_error that f() throws; an empty code if it throws none.
template <typename F>
std::error_code future_error_of(F f) {
    try {
        f();
    } catch (const std::future_error& e) {
        return e.code();
    }
    return {};
}

TEST_P(std_compat_future_test, promise_hands_a_value_to_its_future) {
    conc::promise<std::unique_ptr<int>> p;
    conc::future<std::unique_ptr<int>> f = p.get_future();
    EXPECT_TRUE(f.valid());
    p.set_value(std::make_unique<int>(5));
    EXPECT_EQ(f.wait_for(0s), conc::future_status::ready);
    EXPECT_EQ(*f.get(), 5);
    EXPECT_FALSE(f.valid());  // get() consumes the state

    int x = 1;
    conc::promise<int&> pr;
    auto fr = pr.get_future();
    pr.set_value(x);
    EXPECT_EQ(&fr.get(), &x);

    conc::promise<void> pv;
    auto fv = pv.get_future();
    pv.set_value();
    fv.get();
    EXPECT_FALSE(fv.valid());
}

TEST_P(std_compat_future_test, get_rethrows_the_stored_exception_and_consumes_the_state) {
    conc::promise<int> p;
    auto f = p.get_future();
    p.set_exception(std::make_exception_ptr(std::runtime_error("boom")));
    EXPECT_THROW(f.get(), std::runtime_error);
    EXPECT_FALSE(f.valid());
}

TEST_P(std_compat_future_test, std_future_errors) {
    {  // a promise destroyed unfulfilled: broken_promise, whether or not it is waited on yet
        conc::future<int> f;
        {
            conc::promise<int> p;
            f = p.get_future();
        }
        EXPECT_EQ(future_error_of([&] { (void)f.get(); }), conc::future_errc::broken_promise);
    }
    {  // one fulfilled before it is destroyed is not broken
        conc::future<int> f;
        {
            conc::promise<int> p;
            f = p.get_future();
            p.set_value(3);
        }
        EXPECT_EQ(f.get(), 3);
    }
    {  // a promise assigned over gives up its old state, as destroying it does
        conc::promise<void> p;
        auto f = p.get_future();
        p = conc::promise<void>();
        EXPECT_EQ(future_error_of([&] { f.get(); }), conc::future_errc::broken_promise);
    }
    conc::promise<int> p;
    auto f = p.get_future();
    EXPECT_EQ(future_error_of([&] { (void)p.get_future(); }),
              conc::future_errc::future_already_retrieved);
    p.set_value(1);
    EXPECT_EQ(future_error_of([&] { p.set_value(2); }),
              conc::future_errc::promise_already_satisfied);
    EXPECT_EQ(future_error_of([&] { p.set_exception(std::make_exception_ptr(1)); }),
              conc::future_errc::promise_already_satisfied);
    EXPECT_EQ(f.get(), 1);  // the first value stays

    conc::promise<int> moved(std::move(p));
    EXPECT_EQ(future_error_of([&] { p.set_value(1); }), conc::future_errc::no_state);
    EXPECT_EQ(future_error_of([&] { (void)p.get_future(); }), conc::future_errc::no_state);
    EXPECT_EQ(future_error_of([&] { (void)f.get(); }), conc::future_errc::no_state);  // consumed
    EXPECT_EQ(future_error_of([&] { f.wait(); }), conc::future_errc::no_state);
    EXPECT_EQ(future_error_of([&] { (void)f.wait_for(1ms); }), conc::future_errc::no_state);
    conc::shared_future<int> none;
    EXPECT_EQ(future_error_of([&] { (void)none.get(); }), conc::future_errc::no_state);
}

// With std::future this test never ends: get() blocks the vCPU's OS thread, so the fiber that
// would keep the promise never runs again.
TEST_P(std_compat_future_test, a_fiber_waits_for_a_promise_another_fiber_of_its_vcpu_keeps) {
    conc::promise<int> p;
    auto f = p.get_future();
    conc::thread t([&] {
        conc::this_thread::sleep_for(10ms);
        p.set_value(7);
    });
    EXPECT_EQ(f.get(), 7);
    t.join();

    conc::promise<void> p2;
    auto f2 = p2.get_future();
    conc::thread t2([&] {
        conc::this_thread::yield();
        p2.set_value();
    });
    f2.wait();
    t2.join();
}

TEST_P(std_compat_future_test, wait_for_and_wait_until_time_out_and_see_the_result) {
    conc::promise<int> p;
    auto f = p.get_future();
    const int64_t t0 = mono_now_ns();
    EXPECT_EQ(f.wait_for(10ms), conc::future_status::timeout);
    EXPECT_GE(mono_now_ns() - t0, 10'000'000);
    EXPECT_EQ(f.wait_until(std::chrono::steady_clock::now() + 1ms), conc::future_status::timeout);
    conc::thread t([&] { p.set_value(4); });
    EXPECT_EQ(f.wait_for(10s), conc::future_status::ready);
    EXPECT_EQ(f.wait_until(std::chrono::system_clock::now() + 10s), conc::future_status::ready);
    EXPECT_EQ(f.get(), 4);
    t.join();
}

// wait_until times out once the time point's own clock has reached it, as std's does, not once
// CLOCK_MONOTONIC has gone as far as the clock had left when the wait began.
TEST_P(std_compat_future_test, wait_until_waits_for_the_time_points_clock) {
    conc::promise<int> p;
    auto f = p.get_future();
    const auto tp = half_speed_clock::now() + 20ms;
    EXPECT_EQ(f.wait_until(tp), conc::future_status::timeout);
    EXPECT_GE(half_speed_clock::now(), tp);
}

// std's waits on a future cannot fail for an interrupt: get() waits on for the value, and the
// interrupt stays pending for the waiter's next blocking call.
TEST_P(std_compat_future_test, get_waits_through_an_interrupt_and_leaves_it_pending) {
    conc::promise<int> p;
    auto f = p.get_future();
    bool in_get = false, pending_after = false;
    int got = 0;
    auto g = spawn([&] {
        in_get = true;
        got = f.get();
        pending_after = this_fiber::interrupt_pending();
    });
    ASSERT_TRUE(g);
    while (!in_get) this_fiber::yield();  // one vCPU: g is parked in get() now
    ASSERT_TRUE(g->interrupt());
    p.set_value(3);
    ASSERT_TRUE(g->join());
    EXPECT_EQ(got, 3);
    EXPECT_TRUE(pending_after);
}

TEST_P(std_compat_future_test, shared_futures_share_one_result_and_every_waiter_wakes) {
    conc::promise<std::string> p;
    conc::future<std::string> f = p.get_future();
    conc::shared_future<std::string> sf = f.share();
    EXPECT_FALSE(f.valid());
    EXPECT_TRUE(sf.valid());
    int waiting = 0, woken = 0;
    conc::thread waiters[3];
    for (auto& w : waiters)
        w = conc::thread([&, copy = sf] {
            ++waiting;
            if (copy.get() == "v") ++woken;
        });
    while (waiting < 3) conc::this_thread::yield();
    p.set_value("v");
    for (auto& w : waiters) w.join();
    EXPECT_EQ(woken, 3);
    EXPECT_EQ(&sf.get(), &conc::shared_future<std::string>(sf).get());  // one value, not copies
    EXPECT_TRUE(sf.valid());  // get() does not consume a shared_future

    conc::promise<void> pe;
    conc::shared_future<void> se = pe.get_future();
    pe.set_exception(std::make_exception_ptr(std::runtime_error("x")));
    EXPECT_THROW(se.get(), std::runtime_error);
    EXPECT_THROW(se.get(), std::runtime_error);
}

TEST_P(std_compat_future_test, packaged_task_sends_its_result_or_exception_to_its_future) {
    conc::packaged_task<int(int, int)> add([](int a, int b) { return a + b; });
    EXPECT_TRUE(add.valid());
    auto f = add.get_future();
    EXPECT_EQ(future_error_of([&] { (void)add.get_future(); }),
              conc::future_errc::future_already_retrieved);
    EXPECT_EQ(f.wait_for(0s), conc::future_status::timeout);
    add(2, 3);
    EXPECT_EQ(f.get(), 5);
    EXPECT_EQ(future_error_of([&] { add(1, 1); }), conc::future_errc::promise_already_satisfied);

    add.reset();  // a new state for the same task
    auto f2 = add.get_future();
    conc::thread t(std::move(add), 4, 5);  // runs in another fiber, as a std::thread would
    EXPECT_EQ(f2.get(), 9);
    t.join();
    EXPECT_FALSE(add.valid());
    EXPECT_EQ(future_error_of([&] { add(1, 1); }), conc::future_errc::no_state);
    EXPECT_EQ(future_error_of([&] { add.reset(); }), conc::future_errc::no_state);

    conc::packaged_task<void()> thrower([] { throw std::runtime_error("x"); });
    auto ft = thrower.get_future();
    thrower();  // the exception goes to the future, not to the caller
    EXPECT_THROW(ft.get(), std::runtime_error);

    // Move-only callables, and deduction from a function pointer.
    conc::packaged_task<int()> owner([u = std::make_unique<int>(8)] { return *u; });
    auto fo = owner.get_future();
    owner();
    EXPECT_EQ(fo.get(), 8);
    int (*twice)(int) = [](int v) { return 2 * v; };
    conc::packaged_task deduced(twice);
    auto fd = deduced.get_future();
    deduced(4);
    EXPECT_EQ(fd.get(), 8);
}

TEST_P(std_compat_future_test, packaged_task_destroyed_or_reset_unrun_breaks_its_promise) {
    conc::future<int> f;
    {
        conc::packaged_task<int()> t([] { return 1; });
        f = t.get_future();
    }
    EXPECT_EQ(future_error_of([&] { (void)f.get(); }), conc::future_errc::broken_promise);

    conc::packaged_task<int()> t([] { return 2; });
    auto old = t.get_future();
    t.reset();
    EXPECT_EQ(future_error_of([&] { (void)old.get(); }), conc::future_errc::broken_promise);
    auto fresh = t.get_future();
    t();
    EXPECT_EQ(fresh.get(), 2);
}

TEST_P(std_compat_future_test, async_runs_in_a_fiber_of_the_calling_vcpu_without_a_get) {
    for (auto policy : {conc::launch::async, conc::launch::async | conc::launch::deferred}) {
        bool ran = false;
        conc::thread::id ran_on;
        auto f = conc::async(policy, [&](int v) {
            ran = true;
            ran_on = conc::this_thread::get_id();
            return v;
        }, 6);
        while (!ran) conc::this_thread::yield();  // a deferred task would never run here
        EXPECT_NE(ran_on, conc::this_thread::get_id());
        EXPECT_EQ(f.wait_for(0s), conc::future_status::ready);
        EXPECT_EQ(f.get(), 6);
    }
    bool ran = false;
    auto f = conc::async([&] { ran = true; });  // the default policy behaves as launch::async
    while (!ran) conc::this_thread::yield();
    f.get();

    auto thrower = conc::async(conc::launch::async, [] { throw std::runtime_error("x"); });
    EXPECT_THROW(thrower.get(), std::runtime_error);
}

TEST_P(std_compat_future_test, deferred_async_runs_in_the_first_wait_of_the_caller) {
    bool ran = false;
    conc::thread::id ran_on;
    std::string arg = "copied";
    auto f = conc::async(conc::launch::deferred, [&](std::string s) {
        ran = true;
        ran_on = conc::this_thread::get_id();
        return s;
    }, arg);
    arg = "changed";  // the argument was decay-copied at the call
    conc::this_thread::yield();
    EXPECT_FALSE(ran);
    EXPECT_EQ(f.wait_for(1s), conc::future_status::deferred);  // does not run it
    EXPECT_EQ(f.wait_until(std::chrono::steady_clock::now() + 1s), conc::future_status::deferred);
    EXPECT_FALSE(ran);
    EXPECT_EQ(f.get(), "copied");
    EXPECT_TRUE(ran);
    EXPECT_EQ(ran_on, conc::this_thread::get_id());

    bool never = false;
    { auto unused = conc::async(conc::launch::deferred, [&] { never = true; }); }
    EXPECT_FALSE(never);  // a deferred task nobody waits for never runs

    auto shared = conc::async(conc::launch::deferred, [n = 0]() mutable { return ++n; }).share();
    shared.wait();
    EXPECT_EQ(shared.wait_for(0s), conc::future_status::ready);
    EXPECT_EQ(shared.get(), 1);  // ran once
    EXPECT_EQ(conc::shared_future<int>(shared).get(), 1);
}

// As std's: the destructor of the last future of an async call waits for its task to end.
TEST_P(std_compat_future_test, the_last_future_of_an_async_call_waits_for_its_task) {
    bool ended = false;
    {
        auto f = conc::async(conc::launch::async, [&] {
            conc::this_thread::sleep_for(10ms);
            ended = true;
        });
    }
    EXPECT_TRUE(ended);

    // Only the last one: the task waits for `go`, so a copy that waited for it would deadlock.
    conc::promise<void> go;
    conc::shared_future<void> go_f = go.get_future();
    ended = false;
    auto sf = conc::async(conc::launch::async, [&ended, go_f] {
        go_f.wait();
        ended = true;
    }).share();
    { auto copy = sf; }
    EXPECT_FALSE(ended);
    go.set_value();
    sf = {};
    EXPECT_TRUE(ended);
}

// That wait is a join, which std cannot fail either: it goes on through an interrupt of the
// fiber destroying the future, and leaves the interrupt pending.
TEST_P(std_compat_future_test, the_last_futures_join_waits_through_an_interrupt) {
    conc::promise<void> go;
    conc::shared_future<void> go_f = go.get_future();
    bool ended = false, ended_at_return = false, in_destructor = false, pending_after = false;
    auto g = spawn([&] {
        {
            auto f = conc::async(conc::launch::async, [&ended, go_f] {
                go_f.wait();
                ended = true;
            });
            in_destructor = true;
        }
        ended_at_return = ended;
        pending_after = this_fiber::interrupt_pending();
    });
    ASSERT_TRUE(g);
    while (!in_destructor) this_fiber::yield();  // one vCPU: g is parked in the join now
    ASSERT_TRUE(g->interrupt());
    go.set_value();
    ASSERT_TRUE(g->join());
    EXPECT_TRUE(ended_at_return);
    EXPECT_TRUE(pending_after);
}

// A plain thread waits on a future a fiber keeps, and keeps a promise the fiber waits on.
TEST_P(std_compat_future_test, a_plain_thread_and_a_fiber_wait_on_each_other) {
    conc::promise<int> p;
    auto f = p.get_future();
    conc::promise<void> started;
    auto started_f = started.get_future();
    int got = 0;
    std::thread t([&] {
        started.set_value();
        got = f.get();
    });
    started_f.wait();
    p.set_value(9);
    t.join();
    EXPECT_EQ(got, 9);
}

TEST(std_compat_future_vcpus, futures_across_vcpus) {
    auto rt = runtime::start(test::test_runtime(2));
    ASSERT_TRUE(rt) << rt.error().message();

    // A fiber of vCPU 0 waits for a promise a fiber of vCPU 1 keeps.
    conc::promise<int> p;
    auto f = p.get_future();
    conc::promise<void> waiting;
    conc::shared_future<void> waiting_f = waiting.get_future();
    ASSERT_TRUE((*rt)->post(1, [&] {
        waiting_f.wait();
        p.set_value(42);
    }));
    int got = 0;
    ASSERT_TRUE((*rt)->run(0, [&] {
        waiting.set_value();
        got = f.get();
    }));
    EXPECT_EQ(got, 42);

    // An async task runs on the vCPU that called async; its future is waited on, and its
    // fiber joined, from vCPU 1.
    conc::promise<void> go;
    conc::shared_future<void> go_f = go.get_future();
    conc::future<int> task;
    ASSERT_TRUE((*rt)->run(0, [&] {
        task = conc::async(conc::launch::async, [go_f] {
            go_f.wait();
            return current_vcpu_index();
        });
    }));
    int ran_on = 99;
    ASSERT_TRUE((*rt)->run(1, [&] {
        go.set_value();
        ran_on = task.get();
    }));
    EXPECT_EQ(ran_on, 0);

    // A plain thread (this one) waits for a fiber's promise.
    conc::promise<int> q;
    auto qf = q.get_future();
    ASSERT_TRUE((*rt)->post(1, [&] { q.set_value(5); }));
    EXPECT_EQ(qf.get(), 5);
}

TEST(std_compat_future_misuse, async_outside_a_vcpu) {
    ::setenv("GLUON_MISUSE_ABORT", "0", 1);
    try {
        auto f = conc::async(conc::launch::async, [] {});
        FAIL() << "no exception";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code(), std::errc::operation_not_permitted);
    }
    ::unsetenv("GLUON_MISUSE_ABORT");
    auto d = conc::async(conc::launch::deferred, [] { return 4; });  // needs no fiber
    EXPECT_EQ(d.get(), 4);
}

}  // namespace
}  // namespace gluon
