#include "gluon/std_compat/counting_semaphore.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "gluon/std.h"
#include "support/half_speed_clock.h"
#include "test_support.h"

namespace gluon {
namespace {

namespace conc = std_compat;
using namespace std::chrono_literals;

class counting_semaphore_test : public test::engine_test {};
GLUON_ENGINE_TEST_SUITE(counting_semaphore_test);

static_assert(conc::binary_semaphore::max() == 1);
static_assert(conc::counting_semaphore<5>::max() == 5);
static_assert(conc::counting_semaphore<>::max() >= 1'000'000);

// Constant-initialised, as std's semaphores are.
constinit conc::binary_semaphore static_sem(1);

TEST_P(counting_semaphore_test, counts_permits) {
    conc::counting_semaphore<4> sem(2);
    EXPECT_TRUE(sem.try_acquire());
    EXPECT_TRUE(sem.try_acquire());
    EXPECT_FALSE(sem.try_acquire());
    sem.release(2);
    sem.acquire();
    EXPECT_TRUE(sem.try_acquire_for(0s));
    EXPECT_FALSE(sem.try_acquire_for(0s));
    EXPECT_TRUE(static_sem.try_acquire());
    EXPECT_FALSE(static_sem.try_acquire());
    static_sem.release();
}

// release(n) lets n waiters through, each with a permit of its own.
TEST_P(counting_semaphore_test, release_of_n_wakes_n_waiters) {
    conc::counting_semaphore<> sem(0);
    int waiting = 0, through = 0;
    std::vector<fiber> fs;
    for (int i = 0; i < 3; ++i)
        fs.push_back(*spawn([&] {
            ++waiting;
            sem.acquire();
            ++through;
        }));
    while (waiting < 3) this_fiber::yield();  // one vCPU: all three are parked in acquire now
    EXPECT_EQ(through, 0);
    sem.release(2);
    while (through < 2) this_fiber::yield();
    EXPECT_FALSE(sem.try_acquire());  // both permits went to waiters
    sem.release();
    for (auto& f : fs) ASSERT_TRUE(f.join());
    EXPECT_EQ(through, 3);
}

TEST_P(counting_semaphore_test, try_acquire_for_gives_up_after_its_time) {
    conc::binary_semaphore sem(0);
    test::sleeping_wait w;
    EXPECT_FALSE(sem.try_acquire_for(20ms));
    w.expect(20ms, 2s);
}

using gluon::test::half_speed_clock;

// try_acquire_until gives up once the time point's own clock has reached it, as std's does, not
// once CLOCK_MONOTONIC has gone as far as the clock had left when the wait began.
TEST_P(counting_semaphore_test, try_acquire_until_waits_for_the_time_points_clock) {
    conc::binary_semaphore sem(0);
    const auto tp = half_speed_clock::now() + 20ms;
    EXPECT_FALSE(sem.try_acquire_until(tp));
    EXPECT_GE(half_speed_clock::now(), tp);
    EXPECT_FALSE(sem.try_acquire_until(std::chrono::system_clock::now() - 1s));
    sem.release();
    EXPECT_TRUE(sem.try_acquire_until(std::chrono::steady_clock::now() + 10s));
}

// The fiber that releases runs on the same vCPU as the one that acquires: acquire parks only
// its fiber. std's acquire held the vCPU's thread, so the release never came: acquire hung to
// the test's timeout, and try_acquire_for gave up after its 10 s.
TEST_P(counting_semaphore_test, a_release_from_a_fiber_of_the_same_vcpu_ends_the_wait) {
    conc::binary_semaphore sem(0);
    auto slept = spawn([&] {
        conc::this_thread::sleep_for(1ms);
        sem.release();
    });
    ASSERT_TRUE(slept);
    sem.acquire();
    auto yielded = spawn([&] {
        conc::this_thread::yield();
        sem.release();
    });
    ASSERT_TRUE(yielded);
    EXPECT_TRUE(sem.try_acquire_for(10s));
    ASSERT_TRUE(slept->join());
    ASSERT_TRUE(yielded->join());
}

// std's waits cannot fail for an interrupt: they wait on for the permit (or the time), and the
// interrupt stays pending for the waiter's next blocking call.
TEST_P(counting_semaphore_test, waits_keep_an_interrupt_pending) {
    auto check = [](auto acquire) {
        conc::binary_semaphore sem(0);
        bool waiting = false, got = false, pending_after = false;
        auto g = spawn([&] {
            waiting = true;
            got = acquire(sem);
            pending_after = this_fiber::interrupt_pending();
        });
        ASSERT_TRUE(g);
        while (!waiting) this_fiber::yield();  // one vCPU: the waiter is parked now
        ASSERT_TRUE(g->interrupt());
        this_fiber::yield();
        EXPECT_FALSE(got);
        sem.release();
        ASSERT_TRUE(g->join());
        EXPECT_TRUE(got);
        EXPECT_TRUE(pending_after);
    };
    check([](conc::binary_semaphore& s) { return s.acquire(), true; });
    check([](conc::binary_semaphore& s) { return s.try_acquire_for(10s); });
    check([](conc::binary_semaphore& s) {
        return s.try_acquire_until(std::chrono::steady_clock::now() + 10s);
    });
}

// Ping-pong between fibers on two vCPUs and a plain thread: every wait is a wake-up from
// another thread.
TEST_P(counting_semaphore_test, hands_permits_across_vcpus_and_threads) {
    auto rt = runtime::start(test::test_runtime(2, GetParam()));
    ASSERT_TRUE(rt);
    constexpr int rounds = 300;
    conc::binary_semaphore to0(0), to1(0), to_thread(0);
    std::atomic<int> hops{0};
    latch done(2);
    // Each passes the permit on to the next; a lost wake-up ends its loop after 10 s.
    auto pass = [&](conc::binary_semaphore& from, conc::binary_semaphore& to, bool first) {
        for (int i = 0; i < rounds; ++i) {
            if (first) to.release();
            if (!from.try_acquire_for(10s)) return;
            hops.fetch_add(1);
            if (!first) to.release();
        }
    };
    ASSERT_TRUE((*rt)->post(0, [&] {
        pass(to0, to1, true);
        done.count_down();
    }));
    ASSERT_TRUE((*rt)->post(1, [&] {
        pass(to1, to_thread, false);
        done.count_down();
    }));
    std::thread plain([&] { pass(to_thread, to0, false); });
    ASSERT_TRUE(done.wait(60s));
    plain.join();
    EXPECT_EQ(hops.load(), 3 * rounds);
}

}  // namespace
}  // namespace gluon
