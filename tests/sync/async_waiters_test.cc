// Waiters that are not fibers: continuations linked by the *_async entry points of mutex,
// semaphore, event and channel, woken by fibers and by threads, cancelled against racing
// wake-ups, and mixed with fiber waiters in one FIFO.
#include <gtest/gtest.h>
#include <sched.h>

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gluon/common/clock.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/runtime.h"
#include "gluon/sync/channel.h"
#include "gluon/sync/mutex.h"
#include "gluon/sync/semaphore.h"
#include "test_support.h"

namespace gluon {
namespace {

/// A continuation that records what it was called with and on which thread.
struct recorder {
    std::atomic<int> calls{0};
    std::atomic<long> result{-9999};
    std::thread::id thread;
    waiter w{[](void* ctx, long r) noexcept {
                 auto* self = static_cast<recorder*>(ctx);
                 self->thread = std::this_thread::get_id();
                 self->result = r;
                 ++self->calls;
             },
             this};
};

class async_waiters_test : public test::engine_test {};

TEST_P(async_waiters_test, a_waiter_knows_its_resume_target) {
    waiter fiber_waiter;
    EXPECT_EQ(fiber_waiter.kind(), waiter::target::fiber);
    recorder r;
    EXPECT_EQ(r.w.kind(), waiter::target::continuation);
    std::thread([] {
        waiter thread_waiter;
        EXPECT_EQ(thread_waiter.kind(), waiter::target::thread);
    }).join();
}

TEST_P(async_waiters_test, mutex_hands_off_in_fifo_order_across_fibers_and_continuations) {
    mutex m;
    std::vector<std::string> order;
    m.lock();  // the main fiber holds it
    recorder c;
    const uintptr_t token = 0xC0FFEE;
    ASSERT_EQ(m.lock_async(c.w, token), k_waiting);
    auto b = spawn([&] {
        m.lock();
        order.push_back("fiber");
        m.unlock();
    });
    ASSERT_TRUE(b);
    this_fiber::yield();  // b queues behind the continuation
    m.unlock();           // hands the mutex to the continuation
    EXPECT_EQ(c.calls.load(), 1);
    EXPECT_EQ(c.result.load(), 0);
    order.push_back("continuation");
    EXPECT_FALSE(m.try_lock());  // held on the continuation's behalf
    m.unlock(token);             // its owner token releases it: to the fiber next
    ASSERT_TRUE(b->join());
    EXPECT_EQ(order, (std::vector<std::string>{"continuation", "fiber"}));
    recorder now;
    EXPECT_EQ(m.lock_async(now.w, token), 0);  // free: taken at once, nothing linked
    EXPECT_EQ(now.calls.load(), 0);
    m.unlock(token);
}

TEST_P(async_waiters_test, semaphore_and_event_wake_continuations_from_fibers_and_threads) {
    counting_semaphore sem(0);
    event ev;
    recorder by_fiber, by_thread, on_event;
    ASSERT_EQ(sem.acquire_async(by_fiber.w), k_waiting);
    ASSERT_EQ(sem.acquire_async(by_thread.w), k_waiting);
    ASSERT_EQ(ev.wait_async(on_event.w), k_waiting);
    auto f = spawn([&] { sem.release(1); });
    ASSERT_TRUE(f && f->join());
    EXPECT_EQ(by_fiber.calls.load(), 1);
    EXPECT_EQ(by_fiber.thread, std::this_thread::get_id());
    std::thread::id other;
    std::thread t([&] {
        other = std::this_thread::get_id();
        sem.release(1);
        ev.set();
    });
    t.join();
    EXPECT_EQ(by_thread.calls.load(), 1);
    EXPECT_EQ(by_thread.thread, other);  // a continuation runs on the thread that wakes it
    EXPECT_EQ(on_event.calls.load(), 1);
    EXPECT_EQ(sem.available(), 0);  // each continuation owns the permit it was woken for
    recorder set_now;
    EXPECT_EQ(ev.wait_async(set_now.w), 0);
}

TEST_P(async_waiters_test, channel_continuations_send_receive_and_see_close) {
    channel<std::string> ch(0);
    std::optional<std::string> slot;
    recorder rx;
    ASSERT_EQ(ch.recv_async(rx.w, slot), k_waiting);
    auto sender = spawn([&] { ASSERT_TRUE(ch.send("to the continuation")); });
    ASSERT_TRUE(sender && sender->join());
    EXPECT_EQ(rx.result.load(), 0);
    EXPECT_EQ(slot, "to the continuation");

    std::string value = "from the continuation";
    recorder tx;
    ASSERT_EQ(ch.send_async(tx.w, value), k_waiting);  // unbuffered: waits for a receiver
    auto got = ch.recv();
    ASSERT_TRUE(got);
    EXPECT_EQ(*got, "from the continuation");
    EXPECT_EQ(tx.result.load(), 0);

    std::optional<std::string> never;
    recorder closed_rx, closed_tx;
    std::string unsent = "x";
    ASSERT_EQ(ch.recv_async(closed_rx.w, never), k_waiting);
    ch.close();
    EXPECT_EQ(closed_rx.result.load(), -ENODATA);
    EXPECT_FALSE(never);
    EXPECT_EQ(ch.send_async(closed_tx.w, unsent), -EPIPE);
    EXPECT_EQ(closed_tx.calls.load(), 0);
}

TEST_P(async_waiters_test, cancel_unlinks_exactly_when_no_wake_up_claimed_the_waiter) {
    counting_semaphore sem(0);
    recorder r;
    ASSERT_EQ(sem.acquire_async(r.w), k_waiting);
    EXPECT_TRUE(sem.cancel(r.w));  // unlinked: never woken
    sem.release(1);
    EXPECT_EQ(r.calls.load(), 0);
    EXPECT_EQ(sem.available(), 1);  // the permit was not given to the cancelled waiter
    EXPECT_FALSE(sem.cancel(r.w));  // nothing left to cancel
}

// Cancellation racing a wake-up on another vCPU: exactly one of them wins, every time. The
// rounds go on past k_min_rounds until both outcomes have happened (for 10 s at most): when
// the machine is busy with other tests the wake-up can lose every one of 20,000 rounds.
TEST(async_waiters, cancel_races_a_wake_up_on_another_vcpu_and_exactly_one_wins) {
    cpu_set_t cpus;
    if (sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) < 2)
        GTEST_SKIP() << "one CPU: the two vCPUs cannot race";
    // A wait that lets the other vCPU's thread run when the two share a core.
    auto relax = [n = 0u]() mutable {
        this_fiber::yield();
        if ((++n & 15) == 0) std::this_thread::yield();
    };
    auto rt = runtime::start(test::test_runtime(2));
    ASSERT_TRUE(rt) << rt.error().message();
    constexpr int k_min_rounds = 20000;
    int cancelled = 0, woken = 0, rounds = 0;
    counting_semaphore sem(0);
    std::atomic<int> round{-1};
    std::atomic<int> last_round{INT32_MAX};  // the canceller's round count, once it stops
    std::atomic<bool> done_releasing{false};
    // vCPU 1 releases one permit per round, as soon as the round is set up.
    auto releaser = (*rt)->post(1, [&, relax]() mutable {
        for (int i = 0;; ++i) {
            while (round.load(std::memory_order_acquire) < i) {
                if (i >= last_round.load(std::memory_order_acquire)) {
                    done_releasing = true;
                    return;
                }
                relax();
            }
            sem.release(1);
        }
    });
    auto canceller = (*rt)->run(0, [&, relax]() mutable {
        const int64_t give_up = mono_now_ns() + 10'000'000'000;
        for (int i = 0;; ++i) {
            if ((i >= k_min_rounds && cancelled > 0 && woken > 0) || mono_now_ns() > give_up) {
                rounds = i;
                last_round.store(i, std::memory_order_release);
                return;
            }
            recorder r;
            ASSERT_EQ(sem.acquire_async(r.w), k_waiting);
            round.store(i, std::memory_order_release);
            for (int spin = 0; spin < (i % 7) * 10; ++spin) std::atomic_signal_fence(std::memory_order_seq_cst);
            bool won = sem.cancel(r.w);
            if (won) {
                ++cancelled;
                // The permit of this round is (or will be) in the semaphore: take it back.
                while (!sem.try_acquire()) relax();
            } else {
                while (r.calls.load(std::memory_order_acquire) == 0) relax();
                ++woken;
                EXPECT_EQ(r.result.load(), 0);
            }
            ASSERT_LE(r.calls.load(), won ? 0 : 1);
        }
    });
    ASSERT_TRUE(releaser);
    ASSERT_TRUE(canceller);
    while (!done_releasing.load()) std::this_thread::yield();  // its last release is taken already
    EXPECT_EQ(cancelled + woken, rounds);
    EXPECT_GT(cancelled, 0);  // both outcomes happened: the race was exercised
    EXPECT_GT(woken, 0);
    EXPECT_EQ(sem.available(), 0);
}

GLUON_ENGINE_TEST_SUITE(async_waiters_test);

}  // namespace
}  // namespace gluon
