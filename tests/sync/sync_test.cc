#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <new>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "gluon/runtime/fiber.h"
#include "gluon/runtime/runtime.h"
#include "gluon/runtime/vcpu_call.h"
#include "gluon/sync.h"
#include "support/half_speed_clock.h"
#include "support/canary_storage.h"
#include "test_support.h"

namespace gluon {
namespace {

using namespace std::chrono_literals;
using test::canary_storage;

class sync_test : public test::engine_test {};
GLUON_ENGINE_TEST_SUITE(sync_test);

TEST_P(sync_test, mutex_serialises_fibers_that_yield_inside) {
    mutex m;
    int counter = 0, inside = 0, max_inside = 0;
    std::vector<fiber> fs;
    for (int i = 0; i < 8; ++i)
        fs.push_back(*spawn([&] {
            for (int k = 0; k < 100; ++k) {
                std::lock_guard g(m);
                max_inside = std::max(max_inside, ++inside);
                this_fiber::yield();
                ++counter;
                --inside;
            }
        }));
    for (auto& f : fs) ASSERT_TRUE(f.join());
    EXPECT_EQ(counter, 800);
    EXPECT_EQ(max_inside, 1);
}

TEST_P(sync_test, mutex_lock_for_times_out_and_try_lock) {
    mutex m;
    m.lock();
    std::error_code got;
    bool tried = true;
    auto f = spawn([&] {
        tried = m.try_lock();
        got = m.lock_for(10ms).error();
    });
    ASSERT_TRUE(f->join());
    EXPECT_FALSE(tried);
    EXPECT_EQ(got, std::errc::timed_out);
    m.unlock();
    EXPECT_TRUE(m.try_lock());
    m.unlock();
}

TEST_P(sync_test, mutex_wait_is_interruptible_only_when_asked) {
    mutex m;
    m.lock();
    std::error_code got;
    auto f = spawn([&] { got = m.lock_for(forever, true).error(); });
    this_fiber::yield();
    ASSERT_TRUE(f->interrupt());
    ASSERT_TRUE(f->join());
    EXPECT_EQ(got, std::errc::operation_canceled);
    // Plain lock() ignores the interrupt and still gets the mutex.
    bool locked = false;
    auto g = spawn([&] {
        m.lock();
        locked = true;
        m.unlock();
    });
    this_fiber::yield();
    ASSERT_TRUE(g->interrupt());
    this_fiber::yield();
    EXPECT_FALSE(locked);
    m.unlock();
    ASSERT_TRUE(g->join());
    EXPECT_TRUE(locked);
}

TEST_P(sync_test, recursive_mutex_nests) {
    recursive_mutex m;
    m.lock();
    m.lock();
    bool other = true;
    auto f = spawn([&] { other = m.try_lock(); });
    ASSERT_TRUE(f->join());
    EXPECT_FALSE(other);
    m.unlock();
    m.unlock();
    auto g = spawn([&] { other = m.try_lock(); if (other) m.unlock(); });
    ASSERT_TRUE(g->join());
    EXPECT_TRUE(other);
}

TEST_P(sync_test, condition_variable_with_unique_lock) {
    mutex m;
    condition_variable cv;
    int stage = 0;
    auto f = spawn([&] {
        std::unique_lock lk(m);
        cv.wait(lk, [&] { return stage == 1; });
        stage = 2;
        cv.notify_all();
    });
    {
        std::unique_lock lk(m);
        stage = 1;
        cv.notify_one();
        cv.wait(lk, [&] { return stage == 2; });
    }
    ASSERT_TRUE(f->join());
    std::unique_lock lk(m);
    EXPECT_EQ(cv.wait_for(lk, 5ms), std::cv_status::timeout);
    EXPECT_FALSE(cv.wait_for(lk, 5ms, [] { return false; }));
}

using gluon::test::half_speed_clock;

// wait_until times out by the time point's own clock, as std's does: not before that clock has
// reached it (the predicate overload waits on), and without a predicate not with `timeout`.
TEST_P(sync_test, condition_variable_wait_until_times_out_by_the_time_points_clock) {
    mutex m;
    condition_variable cv;
    std::unique_lock lk(m);
    const auto tp = half_speed_clock::now() + 20ms;
    EXPECT_FALSE(cv.wait_until(lk, tp, [] { return false; }));
    EXPECT_GE(half_speed_clock::now(), tp);
    const auto tp2 = half_speed_clock::now() + 20ms;
    if (cv.wait_until(lk, tp2) == std::cv_status::timeout) {
        EXPECT_GE(half_speed_clock::now(), tp2);
    }
}

TEST_P(sync_test, mutex_try_lock_until_gives_up_by_the_time_points_clock) {
    mutex m;
    m.lock();
    bool got = true;
    half_speed_clock::time_point tp, after;
    auto other = spawn([&] {
        tp = half_speed_clock::now() + 20ms;
        got = m.try_lock_until(tp);
        after = half_speed_clock::now();
    });
    ASSERT_TRUE(other);
    ASSERT_TRUE(other->join());
    EXPECT_FALSE(got);
    EXPECT_GE(after, tp);  // it gave up 20 ms of steady time in, half-way to tp
    m.unlock();
}

// Lets the fiber just spawned run until it waits, then the vCPU fire every timer due: the
// caller then waits with a timeout due at once, so the vCPU goes through its event loop, where
// a timeout of the other fiber's that was already past (earlier than the caller's) ends its
// wait first, and the other fiber runs on before the caller does.
void let_the_other_wait() {
    this_fiber::yield();
    event never;
    (void)never.wait(0ns);
}

TEST_P(sync_test, timeouts_too_long_for_nanoseconds_wait_for_ever) {
    // milliseconds::max() and the like overflowed on their way to nanoseconds, into a timeout
    // already past: each of these gave up at once instead of waiting for the other fiber.
    mutex m;
    condition_variable cv;
    bool ready = false, notified = false, locked = false, locked_until = false;
    auto waiter = spawn([&] {
        std::unique_lock lk(m);
        notified = cv.wait_for(lk, std::chrono::milliseconds::max(), [&] { return ready; });
    });
    let_the_other_wait();
    {
        std::lock_guard g(m);
        ready = true;
        cv.notify_all();
    }
    ASSERT_TRUE(waiter->join());
    EXPECT_TRUE(notified);

    m.lock();
    auto locker = spawn([&] {
        locked = m.try_lock_for(std::chrono::milliseconds::max());
        if (locked) m.unlock();
    });
    let_the_other_wait();
    m.unlock();
    ASSERT_TRUE(locker->join());
    EXPECT_TRUE(locked);
    m.lock();
    auto until = spawn([&] {
        using seconds_point = std::chrono::time_point<std::chrono::steady_clock, std::chrono::seconds>;
        locked_until = m.try_lock_until(seconds_point::max());
        if (locked_until) m.unlock();
    });
    let_the_other_wait();
    m.unlock();
    ASSERT_TRUE(until->join());
    EXPECT_TRUE(locked_until);

    recursive_mutex rm;
    rm.lock();
    bool rlocked = false;
    auto rlocker = spawn([&] {
        rlocked = rm.try_lock_for(std::chrono::hours::max());
        if (rlocked) rm.unlock();
    });
    let_the_other_wait();
    rm.unlock();
    ASSERT_TRUE(rlocker->join());
    EXPECT_TRUE(rlocked);

    shared_mutex sm;
    sm.lock();
    bool shared = false, exclusive = false;
    auto reader = spawn([&] {
        shared = sm.try_lock_shared_for(std::chrono::hours::max());
        if (shared) sm.unlock_shared();
    });
    let_the_other_wait();
    sm.unlock();
    ASSERT_TRUE(reader->join());
    sm.lock_shared();
    auto writer = spawn([&] {
        exclusive = sm.try_lock_for(std::chrono::milliseconds::max());
        if (exclusive) sm.unlock();
    });
    let_the_other_wait();
    sm.unlock_shared();
    ASSERT_TRUE(writer->join());
    EXPECT_TRUE(shared);
    EXPECT_TRUE(exclusive);
}

// Constant-initialised, as std's primitives are: a static initialiser of another translation
// unit may use them whatever the order in which the initialisers run.
constinit mutex static_mutex;
constinit condition_variable static_cv;
constinit counting_semaphore static_sem(1);
constinit latch static_latch(1);

TEST_P(sync_test, primitives_are_constant_initialised) {
    static_mutex.lock();
    static_cv.notify_all();
    static_mutex.unlock();
    ASSERT_TRUE(static_sem.acquire());
    EXPECT_FALSE(static_sem.try_acquire());
    static_sem.release();
    static_latch.count_down();
    EXPECT_TRUE(static_latch.try_wait());
}

TEST_P(sync_test, semaphore_limits_concurrency) {
    counting_semaphore sem(2);
    int inside = 0, max_inside = 0;
    std::vector<fiber> fs;
    for (int i = 0; i < 6; ++i)
        fs.push_back(*spawn([&] {
            ASSERT_TRUE(sem.acquire());
            max_inside = std::max(max_inside, ++inside);
            (void)this_fiber::sleep_for(1ms);
            --inside;
            sem.release();
        }));
    for (auto& f : fs) ASSERT_TRUE(f.join());
    EXPECT_EQ(max_inside, 2);
    EXPECT_EQ(sem.available(), 2);
    counting_semaphore empty(0);
    EXPECT_EQ(empty.acquire(2ms).error(), std::errc::timed_out);
}

TEST_P(sync_test, latch_event_and_wait_group) {
    latch l(3);
    wait_group wg;
    event ev;
    int done = 0;
    std::vector<fiber> fs;
    wg.add(3);
    for (int i = 0; i < 3; ++i)
        fs.push_back(*spawn([&] {
            ASSERT_TRUE(ev.wait());
            ++done;
            l.count_down();
            wg.done();
        }));
    this_fiber::yield();
    EXPECT_FALSE(l.try_wait());
    EXPECT_EQ(ev.wait(1ms).error(), std::errc::timed_out);
    ev.set();
    ASSERT_TRUE(l.wait());
    ASSERT_TRUE(wg.wait());
    EXPECT_EQ(done, 3);
    for (auto& f : fs) ASSERT_TRUE(f.join());
}

TEST_P(sync_test, shared_mutex_readers_share_writers_exclude) {
    shared_mutex m;
    int readers = 0, max_readers = 0;
    bool writer_inside = false, overlap = false;
    std::vector<fiber> fs;
    for (int i = 0; i < 4; ++i)
        fs.push_back(*spawn([&] {
            std::shared_lock lk(m);
            if (writer_inside) overlap = true;
            max_readers = std::max(max_readers, ++readers);
            this_fiber::yield();
            --readers;
        }));
    fs.push_back(*spawn([&] {
        std::unique_lock lk(m);
        writer_inside = true;
        if (readers) overlap = true;
        this_fiber::yield();
        writer_inside = false;
    }));
    for (auto& f : fs) ASSERT_TRUE(f.join());
    EXPECT_GE(max_readers, 2);
    EXPECT_FALSE(overlap);
}

// A reader queued behind a writer goes in when that writer unlocks, before the writers queued
// after it. The lock went from writer to writer while any was queued, so a reader waited for
// as long as writers kept coming.
TEST_P(sync_test, shared_mutex_lets_a_queued_reader_in_before_the_next_writer) {
    shared_mutex m;
    std::string order;
    m.lock();
    auto r = spawn([&] {
        m.lock_shared();
        order += 'R';
        this_fiber::yield();  // the writers must wait for it
        m.unlock_shared();
    });
    this_fiber::yield();  // the reader queues
    std::vector<fiber> ws;
    for (int i = 0; i < 3; ++i)
        ws.push_back(*spawn([&] {
            m.lock();
            order += 'W';
            this_fiber::yield();  // the next writer queues while this one holds the lock
            m.unlock();
        }));
    this_fiber::yield();  // the writers queue
    m.unlock();
    ASSERT_TRUE(r->join());
    for (auto& w : ws) ASSERT_TRUE(w.join());
    EXPECT_EQ(order, "RWWW");
}

// A writer still gets in while readers keep coming: readers that ask once it waits queue behind
// it, and those that queued during its hold go before the next writer.
TEST_P(sync_test, shared_mutex_readers_do_not_starve_a_waiting_writer) {
    shared_mutex m;
    m.lock_shared();
    bool wrote = false;
    auto w = spawn([&] {
        m.lock();
        wrote = true;
        m.unlock();
    });
    this_fiber::yield();  // the writer queues behind our read lock
    EXPECT_FALSE(m.try_lock_shared());
    int late_reads = 0;
    auto r = spawn([&] {
        m.lock_shared();
        if (wrote) ++late_reads;
        m.unlock_shared();
    });
    this_fiber::yield();  // the late reader queues behind the writer
    m.unlock_shared();
    ASSERT_TRUE(w->join());
    ASSERT_TRUE(r->join());
    EXPECT_TRUE(wrote);
    EXPECT_EQ(late_reads, 1);
}

TEST_P(sync_test, unbuffered_channel_is_a_rendezvous) {
    channel<int> ch;
    std::vector<int> got;
    bool sent = false;
    auto f = spawn([&] {
        ASSERT_TRUE(ch.send(1));
        sent = true;
        ASSERT_TRUE(ch.send(2));
        ch.close();
    });
    this_fiber::yield();
    EXPECT_FALSE(sent);  // nobody received yet
    for (int v : ch) got.push_back(v);
    ASSERT_TRUE(f->join());
    EXPECT_EQ(got, (std::vector<int>{1, 2}));
    EXPECT_EQ(ch.send(3).error(), std::errc::broken_pipe);
}

TEST_P(sync_test, buffered_channel_try_and_timeouts) {
    channel<std::string> ch(2);
    EXPECT_TRUE(ch.try_send("a"));
    EXPECT_TRUE(ch.try_send("b"));
    EXPECT_EQ(ch.try_send("c").error(), std::errc::resource_unavailable_try_again);
    EXPECT_EQ(ch.send("c", 2ms).error(), std::errc::timed_out);
    EXPECT_EQ(*ch.recv(), "a");
    ch.close();
    EXPECT_EQ(*ch.recv(), "b");  // drained after close
    EXPECT_EQ(ch.recv().error(), std::errc::no_message_available);  // the end, as for a byte stream
    EXPECT_EQ(ch.try_recv().error(), std::errc::no_message_available);
    channel<int> empty(1);
    EXPECT_EQ(empty.try_recv().error(), std::errc::resource_unavailable_try_again);
    EXPECT_EQ(empty.recv(2ms).error(), std::errc::timed_out);
}

TEST_P(sync_test, close_ends_blocked_receivers_with_enodata_and_blocked_senders_with_epipe) {
    channel<int> none(0), full(1);
    ASSERT_TRUE(full.try_send(1));
    std::error_code recv_err, send_err;
    auto r = spawn([&] { recv_err = none.recv().error(); });
    auto s = spawn([&] { send_err = full.send(2).error(); });
    ASSERT_TRUE(r && s);
    this_fiber::yield();  // both are blocked now
    none.close();
    full.close();
    ASSERT_TRUE(r->join());
    ASSERT_TRUE(s->join());
    EXPECT_EQ(recv_err, std::errc::no_message_available);
    EXPECT_EQ(send_err, std::errc::broken_pipe);
}

TEST_P(sync_test, blocked_sender_hands_value_through_full_buffer) {
    channel<int> ch(1);
    auto f = spawn([&] {
        for (int i = 0; i < 100; ++i) ASSERT_TRUE(ch.send(i));
        ch.close();
    });
    int expect = 0;
    for (int v : ch) EXPECT_EQ(v, expect++);
    EXPECT_EQ(expect, 100);
    ASSERT_TRUE(f->join());
}

// Plain OS threads (not vCPUs) and fibers share one channel and one mutex.
TEST_P(sync_test, threads_and_fibers_interoperate) {
    channel<int> ch(4);
    mutex m;
    long sum = 0;
    std::thread producer([&] {
        for (int i = 1; i <= 1000; ++i) ASSERT_TRUE(ch.send(i));
        ch.close();
    });
    std::thread locker([&] {
        for (int i = 0; i < 1000; ++i) {
            std::lock_guard g(m);
            ++sum;
        }
    });
    auto f = spawn([&] {
        for (int v : ch) {
            std::lock_guard g(m);
            sum += v;
        }
    });
    ASSERT_TRUE(f->join());
    producer.join();
    locker.join();
    EXPECT_EQ(sum, 1000 + 500500);
}

TEST_P(sync_test, an_interrupt_after_a_wake_up_from_another_vcpu_leaves_the_destroyed_channel_alone) {
    // A fiber of another vCPU sends the value a fiber here waits for, which posts its wake-up
    // here, and destroys the channel, as it may once nobody waits on it; this vCPU interrupts
    // the receiver before its event loop has taken the wake-up. The interrupt must not look at
    // the channel (it took the channel's lock), and the receive succeeds: the value came first.
    auto rt = runtime::start(test::test_runtime(1, GetParam()));
    ASSERT_TRUE(rt);
    canary_storage<channel<int>> ch;
    ch.make();
    int got = -1;
    auto f = spawn([&] {
        auto v = ch.get()->recv(10s);  // its timer stays armed until the fiber runs
        got = v ? *v : -v.error().value();
    });
    ASSERT_TRUE(f);
    this_fiber::yield();  // f parks in recv
    std::atomic<bool> sent{false};
    ASSERT_TRUE((*rt)->post(0, [&] {
        EXPECT_TRUE(ch.get()->send(7));
        ch.destroy();
        sent.store(true, std::memory_order_release);
    }));
    while (!sent.load(std::memory_order_acquire)) {
    }  // no switch: this vCPU's event loop must not run the posted wake-up yet
    ASSERT_TRUE(f->interrupt());
    ASSERT_TRUE(f->join());
    EXPECT_EQ(got, 7);
    EXPECT_TRUE(ch.untouched());
}

TEST_P(sync_test, a_timeout_after_a_wake_up_from_another_vcpu_leaves_the_destroyed_event_alone) {
    // The fiber's timeout is due in the same pass of the event loop as a timer before it, in
    // which a fiber of another vCPU sets the event and destroys it: the wake-up it posts here
    // waits in the inbox, drained before the timers, while the timeout runs.
    auto rt = runtime::start(test::test_runtime(1, GetParam()));
    ASSERT_TRUE(rt);
    struct setter {
        vcpu_timer timer;  // first: the callback finds the setter from it
        std::atomic<bool> go{false}, done{false};
    } s;
    canary_storage<event> ev;
    ev.make();
    int res = -1;
    auto f = spawn([&] {
        auto r = ev.get()->wait(200ms);
        res = r ? 0 : r.error().value();
    });
    ASSERT_TRUE(f);
    this_fiber::yield();  // f parks in wait
    const int64_t past_both = mono_now_ns() + 210'000'000;
    ASSERT_TRUE((*rt)->post(0, [&] {
        while (!s.go.load(std::memory_order_acquire)) {
        }
        ev.get()->set();
        ev.destroy();
        s.done.store(true, std::memory_order_release);
    }));
    ASSERT_TRUE(s.timer.arm(deadline_after(1ms), [](vcpu_timer* tm) noexcept {
        auto* self = reinterpret_cast<setter*>(tm);
        self->go.store(true, std::memory_order_release);
        while (!self->done.load(std::memory_order_acquire)) {
        }
    }));
    while (mono_now_ns() < past_both) {
    }  // holds the vCPU: no timer fires until both are due
    ASSERT_TRUE(f->join());
    EXPECT_EQ(res, 0);
    EXPECT_TRUE(ev.untouched());
}

TEST_P(sync_test, an_interrupt_after_a_wake_up_on_the_same_vcpu_leaves_the_destroyed_event_alone) {
    canary_storage<event> ev;
    ev.make();
    int res = -1;
    auto f = spawn([&] {
        auto r = ev.get()->wait(10s);
        res = r ? 0 : r.error().value();
    });
    ASSERT_TRUE(f);
    this_fiber::yield();  // f parks in wait
    ev.get()->set();      // f is queued behind us
    ev.destroy();
    ASSERT_TRUE(f->interrupt());
    ASSERT_TRUE(f->join());
    EXPECT_EQ(res, 0);
    EXPECT_TRUE(ev.untouched());
}

TEST_P(sync_test, a_timeout_after_a_wake_up_on_the_same_vcpu_leaves_the_destroyed_event_alone) {
    // A timer sets the event and destroys it; the fiber's own timeout is due in the same pass
    // of the event loop, which runs after both deadlines, before the fiber.
    struct setter {
        vcpu_timer timer;  // first: the callback finds the setter from it
        canary_storage<event> ev;
    } s;
    s.ev.make();
    int res = -1;
    auto f = spawn([&] {
        auto r = s.ev.get()->wait(200ms);
        res = r ? 0 : r.error().value();
    });
    ASSERT_TRUE(f);
    this_fiber::yield();  // f parks in wait
    const int64_t past_both = mono_now_ns() + 210'000'000;
    ASSERT_TRUE(s.timer.arm(deadline_after(1ms), [](vcpu_timer* tm) noexcept {
        auto* self = reinterpret_cast<setter*>(tm);
        self->ev.get()->set();
        self->ev.destroy();
    }));
    while (mono_now_ns() < past_both) {
    }  // holds the vCPU: no timer fires until both are due
    ASSERT_TRUE(f->join());
    EXPECT_EQ(res, 0);
    EXPECT_TRUE(s.ev.untouched());
}

}  // namespace
}  // namespace gluon
