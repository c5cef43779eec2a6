#include "gluon/std.h"

#include <gtest/gtest.h>

#include <mutex>

#include "support/half_speed_clock.h"
#include "test_support.h"

namespace gluon {
namespace {

namespace conc = std_compat;
using namespace std::chrono_literals;

class std_compat_test : public test::engine_test {};
GLUON_ENGINE_TEST_SUITE(std_compat_test);

TEST_P(std_compat_test, thread_join_ids_and_errors) {
    int x = 0;
    conc::thread t([&](int v) { x = v; }, 5);
    EXPECT_TRUE(t.joinable());
    EXPECT_NE(t.get_id(), conc::this_thread::get_id());
    t.join();
    EXPECT_EQ(x, 5);
    EXPECT_FALSE(t.joinable());
    EXPECT_THROW(t.join(), std::system_error);
    conc::thread d([] {});
    d.detach();
    EXPECT_FALSE(d.joinable());
}

// std::thread::join cannot fail for an interrupt: the join waits on, and the interrupt stays
// pending for the joining fiber's next blocking call.
TEST_P(std_compat_test, join_waits_through_an_interrupt_and_leaves_it_pending) {
    bool release = false, in_join = false, threw = false, pending_after = false;
    auto g = spawn([&] {
        conc::thread t([&] {
            while (!release) conc::this_thread::yield();
        });
        in_join = true;
        try {
            t.join();
        } catch (const std::system_error&) {
            threw = true;
            release = true;
            t.join();
        }
        pending_after = this_fiber::interrupt_pending();
    });
    ASSERT_TRUE(g);
    while (!in_join) this_fiber::yield();
    ASSERT_TRUE(g->interrupt());
    release = true;
    ASSERT_TRUE(g->join());
    EXPECT_FALSE(threw);
    EXPECT_TRUE(pending_after);
}

TEST_P(std_compat_test, sleep_for_sleeps_the_full_time) {
    auto t0 = mono_now_ns();
    conc::this_thread::sleep_for(5ms);
    EXPECT_GE(mono_now_ns() - t0, 5'000'000);
}

// std::this_thread's sleeps cannot fail for an interrupt either: the sleep goes on to its end
// and the interrupt stays pending for the sleeper's next blocking call.
TEST_P(std_compat_test, sleeps_sleep_through_an_interrupt_and_leave_it_pending) {
    auto check = [](auto sleep) {
        bool asleep = false, pending_after = false;
        int64_t slept = 0;
        auto g = spawn([&] {
            asleep = true;
            const int64_t t0 = mono_now_ns();
            sleep();
            slept = mono_now_ns() - t0;
            pending_after = this_fiber::interrupt_pending();
        });
        ASSERT_TRUE(g);
        while (!asleep) this_fiber::yield();  // one vCPU: the sleeper is parked in its sleep now
        ASSERT_TRUE(g->interrupt());
        ASSERT_TRUE(g->join());
        EXPECT_GE(slept, 20'000'000);
        EXPECT_TRUE(pending_after);
    };
    check([] { conc::this_thread::sleep_for(20ms); });
    check([] { conc::this_thread::sleep_until(std::chrono::steady_clock::now() + 20ms); });
}

using gluon::test::half_speed_clock;

// sleep_until returns once the time point's own clock has reached it, as std's does, not once
// CLOCK_MONOTONIC has gone as far as the clock had left when the sleep began.
TEST_P(std_compat_test, sleep_until_waits_for_the_time_points_clock) {
    const auto tp = half_speed_clock::now() + 20ms;
    conc::this_thread::sleep_until(tp);
    EXPECT_GE(half_speed_clock::now(), tp);
}

TEST_P(std_compat_test, mutex_and_condition_variable_std_shaped) {
    conc::mutex m;
    conc::condition_variable cv;
    bool ready = false;
    conc::thread t([&] {
        std::lock_guard g(m);
        ready = true;
        cv.notify_one();
    });
    {
        std::unique_lock lk(m);
        EXPECT_TRUE(cv.wait_for(lk, 5s, [&] { return ready; }));
    }
    t.join();
    conc::timed_mutex tm;
    EXPECT_TRUE(tm.try_lock_for(1ms));
    tm.unlock();
}

TEST(std_compat_misuse, thread_outside_vcpu_throws_eperm) {
    ::setenv("GLUON_MISUSE_ABORT", "0", 1);
    try {
        conc::thread t([] {});
        FAIL() << "no exception";
    } catch (const std::system_error& e) {
        EXPECT_EQ(e.code(), std::errc::operation_not_permitted);
    }
    ::unsetenv("GLUON_MISUSE_ABORT");
}

}  // namespace
}  // namespace gluon
