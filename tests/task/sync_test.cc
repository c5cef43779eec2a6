// Tasks and fibers on one set of sync primitives; I/O awaits with timeouts and cancellation.
#include "gluon/task/sync.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <stop_token>

#include "gluon/runtime/fd.h"
#include "gluon/runtime/runtime.h"
#include "gluon/runtime/vcpu_call.h"
#include "gluon/task/io.h"
#include "gluon/task/spawn.h"
#include "support/canary_storage.h"
#include "test_support.h"

namespace gluon {
namespace {

using namespace std::chrono_literals;

class task_sync_test : public test::engine_test {};

using test::canary_storage;
using test::sock_pair;

TEST_P(task_sync_test, channel_between_a_fiber_and_a_task) {
    channel<int> to_task(0), to_fiber(4);
    auto consumer = [](channel<int>* in, channel<int>* out) -> task<long> {
        long sum = 0;
        for (;;) {
            auto v = co_await co::recv(*in);
            if (!v) break;  // closed
            sum += *v;
            EXPECT_TRUE(co_await co::send(*out, *v * 2));
        }
        out->close();
        co_return sum;
    };
    auto h = co_spawn(consumer(&to_task, &to_fiber)).value();
    auto f = spawn([&] {
        for (int i = 1; i <= 1000; ++i) ASSERT_TRUE(to_task.send(i));
        to_task.close();
    });
    long doubled = 0;
    while (auto v = to_fiber.recv()) doubled += *v;
    ASSERT_TRUE(f->join());
    EXPECT_EQ(h.join(), 500500);
    EXPECT_EQ(doubled, 1001000);
}

TEST_P(task_sync_test, one_mutex_for_fibers_and_tasks) {
    mutex m;
    long counter = 0;
    auto t = [](mutex* mu, long* c) -> task<void> {
        for (int i = 0; i < 1000; ++i) {
            auto g = co_await co::lock(*mu);
            EXPECT_TRUE(g);
            long v = *c;
            co_await co::yield();  // hold it across a suspension
            *c = v + 1;
        }
    };
    std::vector<join_handle<void>> tasks;
    for (int i = 0; i < 4; ++i) tasks.push_back(co_spawn(t(&m, &counter)).value());
    std::vector<fiber> fibers;
    for (int i = 0; i < 4; ++i)
        fibers.push_back(spawn([&] {
            for (int k = 0; k < 1000; ++k) {
                m.lock();
                long v = counter;
                this_fiber::yield();
                counter = v + 1;
                m.unlock();
            }
        }).value());
    for (auto& h : tasks) h.join();
    for (auto& f : fibers) ASSERT_TRUE(f.join());
    EXPECT_EQ(counter, 8000);
}

TEST_P(task_sync_test, event_semaphore_and_their_timeouts) {
    event e;
    counting_semaphore sem(0);
    auto t = [](event* ev, counting_semaphore* s) -> task<int> {
        auto late = co_await co::acquire(*s, 10ms);
        EXPECT_FALSE(late);
        EXPECT_EQ(late.error().value(), ETIMEDOUT);
        EXPECT_TRUE(co_await co::wait(*ev));
        EXPECT_TRUE(co_await co::acquire(*s));
        co_return 7;
    };
    auto h = co_spawn(t(&e, &sem)).value();
    auto f = spawn([&] {
        ASSERT_TRUE(this_fiber::sleep_for(30ms));
        e.set();
        sem.release();
    });
    EXPECT_EQ(h.join(), 7);
    ASSERT_TRUE(f->join());
}

TEST_P(task_sync_test, a_task_awaits_a_fiber) {
    int state = 0;
    auto f = spawn([&] {
        (void)this_fiber::sleep_for(5ms);
        state = 1;
    });
    auto t = [](fiber* fb, int* st) -> task<int> {
        auto r = co_await co::join(*fb);
        EXPECT_TRUE(r);
        EXPECT_FALSE(fb->joinable());
        co_return *st;
    };
    EXPECT_EQ(block_on(t(&*f, &state)).value(), 1);
}

TEST_P(task_sync_test, a_join_cancelled_after_the_fiber_ended_leaves_the_fiber_alone) {
    // The fiber's end queues the task; before the task runs, a new fiber's spawn reaps the
    // ended one (its stack, not of the default size, is unmapped rather than cached) and the
    // task is cancelled. Its cancel hook must not look at a fiber that has gone, and the join
    // succeeds: the fiber ended first.
    event end;
    auto f = spawn(fiber_options{.stack_size = 64 * 1024}, [&] { (void)end.wait(); });
    ASSERT_TRUE(f);
    bool started = false, resumed = false;
    auto t = [](fiber* fb, bool* st, bool* res) -> task<int> {
        *st = true;
        auto r = co_await co::join(*fb);
        *res = true;
        co_return r ? 0 : r.error().value();
    };
    auto h = co_spawn(t(&*f, &started, &resumed)).value();
    while (!started) this_fiber::yield();
    end.set();
    this_fiber::yield();    // the fiber runs and ends, which queues the task behind us
    ASSERT_FALSE(resumed);  // (the window this test is about)
    auto reaper = spawn([] {});
    ASSERT_TRUE(reaper);
    h.cancel();
    EXPECT_EQ(h.join(), 0);
    EXPECT_FALSE(f->joinable());
    ASSERT_TRUE(reaper->join());
}

TEST_P(task_sync_test, a_cancel_after_the_wake_up_leaves_the_destroyed_event_alone) {
    // A fiber sets the event, which queues the task behind it, and destroys the event, as it
    // may once nobody waits on it; the task is cancelled before it runs. The cancel must not
    // look at the event (it took the event's lock, writing into its storage), and the wait
    // succeeds: the event was set first.
    canary_storage<event> ev;
    ev.make();
    bool started = false;
    int res = -1;
    auto t = [](event* e, bool* st, int* out) -> task<void> {
        *st = true;
        auto r = co_await co::wait(*e, 10s);  // its timer stays armed until the task runs
        *out = r ? 0 : r.error().value();
    };
    auto h = co_spawn(t(ev.get(), &started, &res)).value();
    while (!started) this_fiber::yield();
    ev.get()->set();
    ev.destroy();
    h.cancel();
    h.join();
    EXPECT_EQ(res, 0);
    EXPECT_TRUE(ev.untouched());
}

TEST_P(task_sync_test, a_timeout_after_the_wake_up_leaves_the_destroyed_event_alone) {
    // A timer sets the event and destroys it; the task's own timeout is due in the same pass
    // of the event loop, which runs after both deadlines, before the task.
    struct setter {
        vcpu_timer timer;  // first: the callback finds the setter from it
        canary_storage<event> ev;
    } s;
    s.ev.make();
    bool started = false;
    int res = -1;
    auto t = [](event* e, bool* st, int* out) -> task<void> {
        *st = true;
        auto r = co_await co::wait(*e, 200ms);
        *out = r ? 0 : r.error().value();
    };
    auto h = co_spawn(t(s.ev.get(), &started, &res)).value();
    while (!started) this_fiber::yield();
    // The task's deadline is at most 200 ms from now, the setter's well before it.
    const int64_t past_both = mono_now_ns() + 210'000'000;
    ASSERT_TRUE(s.timer.arm(deadline_after(1ms), [](vcpu_timer* tm) noexcept {
        auto* self = reinterpret_cast<setter*>(tm);
        self->ev.get()->set();
        self->ev.destroy();
    }));
    while (mono_now_ns() < past_both) {
    }  // holds the vCPU: no timer fires until both are due
    h.join();
    EXPECT_EQ(res, 0);
    EXPECT_TRUE(s.ev.untouched());
}

TEST_P(task_sync_test, a_cancel_before_a_wake_up_from_another_vcpu_arrives_leaves_the_channel_alone) {
    // A fiber on another vCPU sends the value the task waits for, which posts the task's
    // wake-up here, and destroys the channel; this vCPU cancels the task before its event loop
    // has taken the wake-up. The value was received: the receive succeeds.
    auto rt = runtime::start(test::test_runtime(1, GetParam()));
    ASSERT_TRUE(rt);
    canary_storage<channel<int>> ch;
    ch.make();
    bool started = false;
    int got = -1;
    auto t = [](channel<int>* c, bool* st, int* out) -> task<void> {
        *st = true;
        auto v = co_await co::recv(*c, 10s);
        *out = v ? *v : -v.error().value();
    };
    auto h = co_spawn(t(ch.get(), &started, &got)).value();
    while (!started) this_fiber::yield();
    std::atomic<bool> sent{false};
    ASSERT_TRUE((*rt)->post(0, [&] {
        EXPECT_TRUE(ch.get()->send(7));
        ch.destroy();
        sent.store(true, std::memory_order_release);
    }));
    while (!sent.load(std::memory_order_acquire)) {
    }  // no switch: this vCPU's event loop must not run the posted wake-up yet
    h.cancel();
    h.join();
    EXPECT_EQ(got, 7);
    EXPECT_TRUE(ch.untouched());
}

TEST_P(task_sync_test, socket_io_with_a_timeout) {
    sock_pair sp;
    auto t = [](int a, int b) -> task<void> {
        char buf[64];
        auto r = co_await co::recv_some(a, buf, sizeof buf, 0, 10ms);
        EXPECT_FALSE(r);
        EXPECT_EQ(r.error().value(), ETIMEDOUT);
        EXPECT_TRUE(co_await co::send_all(b, "hello", 5));
        EXPECT_TRUE(co_await co::recv_exactly(a, buf, 5));
        EXPECT_EQ(std::string(buf, 5), "hello");
    };
    ASSERT_TRUE(block_on(t(sp.fd[0], sp.fd[1])));
}

TEST_P(task_sync_test, a_stop_token_cancels_the_operation_in_flight) {
    sock_pair sp;
    channel<int> ch;
    std::stop_source src;
    auto t = [](int fd, channel<int>* c) -> task<int> {
        char buf[16];
        auto r = co_await co::recv_some(fd, buf, sizeof buf);
        EXPECT_FALSE(r);
        EXPECT_EQ(r.error().value(), ECANCELED);
        auto v = co_await co::recv(*c);  // fails at once: the task is cancelled
        EXPECT_FALSE(v);
        co_return r ? 0 : r.error().value();
    };
    auto h = co_spawn(t(sp.fd[0], &ch), {.stop = src.get_token()}).value();
    auto f = spawn([&] {
        this_fiber::yield();
        src.request_stop();
    });
    EXPECT_EQ(h.join(), ECANCELED);
    ASSERT_TRUE(f->join());
}

TEST_P(task_sync_test, a_token_stopped_before_the_spawn_cancels_the_first_operation) {
    // The send would complete at its submission: it must not be made at all.
    sock_pair sp;
    std::stop_source src;
    src.request_stop();
    auto t = [](int fd) -> task<int> {
        auto r = co_await co::send_some(fd, "x", 1);
        co_return r ? 0 : r.error().value();
    };
    auto h = co_spawn(t(sp.fd[0]), {.stop = src.get_token()}).value();
    EXPECT_EQ(h.join(), ECANCELED);
    char b[4];
    EXPECT_EQ(::recv(sp.fd[1], b, sizeof b, MSG_DONTWAIT), -1);  // nothing was sent
}

TEST_P(task_sync_test, stop_requested_from_another_thread) {
    channel<int> ch;
    std::stop_source src;
    auto t = [](channel<int>* c) -> task<int> {
        auto v = co_await co::recv(*c);
        co_return v ? 0 : v.error().value();
    };
    auto h = co_spawn(t(&ch), {.stop = src.get_token()}).value();
    std::thread other([&] { src.request_stop(); });
    EXPECT_EQ(h.join(), ECANCELED);
    other.join();
}

TEST_P(task_sync_test, cancel_through_the_handle_and_await_the_loser) {
    sock_pair sp;
    auto blocked = [](int fd) -> task<int> {
        char b[8];
        auto r = co_await co::recv_some(fd, b, sizeof b);
        co_return r ? 0 : r.error().value();
    };
    auto h = co_spawn(blocked(sp.fd[0])).value();
    auto canceller = [](join_handle<int>* hh) -> task<int> {
        co_await co::yield();
        hh->cancel();
        co_return co_await *hh;
    };
    EXPECT_EQ(block_on(canceller(&h)).value(), ECANCELED);
}

TEST_P(task_sync_test, fini_cancels_tasks_still_suspended) {
    sock_pair sp;
    auto forever_recv = [](int f, int peer) -> task<void> {
        char b[8];
        auto r = co_await co::recv_some(f, b, sizeof b);
        EXPECT_FALSE(r);
        EXPECT_EQ(r.error().value(), ECANCELED);
        (void)fd::close(f);
        (void)fd::close(peer);
    };
    co_spawn(forever_recv(sp.fd[0], sp.fd[1]))->detach();
    sp.fd[0] = sp.fd[1] = -1;
    this_fiber::yield();
    // TearDown's fini() must cancel it and return.
}

TEST_P(task_sync_test, fini_cancels_tasks_that_keep_one_another_ready) {
    // Two tasks passing a value back and forth: one is always ready, so the runner never runs
    // dry and parks. fini must reach them all the same (without it, it waited for ever).
    channel<int> a(1), b(1);
    auto player = [](channel<int>* in, channel<int>* out, long* rounds, int* err) -> task<void> {
        for (;;) {
            auto v = co_await co::recv(*in);
            if (!v) {
                *err = v.error().value();
                co_return;
            }
            ++*rounds;
            if (auto s = co_await co::send(*out, *v + 1); !s) {
                *err = s.error().value();
                co_return;
            }
        }
    };
    long ra = 0, rb = 0;
    int ea = 0, eb = 0;
    co_spawn(player(&a, &b, &ra, &ea))->detach();
    co_spawn(player(&b, &a, &rb, &eb))->detach();
    ASSERT_TRUE(a.try_send(0));
    while (ra < 1000) this_fiber::yield();
    ASSERT_TRUE(fini().has_value());  // returns once both have ended
    EXPECT_EQ(ea, ECANCELED);
    EXPECT_EQ(eb, ECANCELED);
}

TEST_P(task_sync_test, channel_across_vcpus) {
    auto rt = runtime::start(test::test_runtime(2, GetParam()));
    ASSERT_TRUE(rt);
    channel<int> ch(2);
    auto consumer = [](channel<int>* c) -> task<long> {
        long s = 0;
        while (auto v = co_await co::recv(*c)) s += *v;
        co_return s;
    };
    auto h = co_spawn(consumer(&ch), {.on = (*rt)->vcpu(0)}).value();
    ASSERT_TRUE((*rt)->run(1, [&] {
        for (int i = 1; i <= 10000; ++i) ASSERT_TRUE(ch.send(i));
        ch.close();
    }));
    EXPECT_EQ(h.join(), 50005000);
}

GLUON_ENGINE_TEST_SUITE(task_sync_test);

}  // namespace
}  // namespace gluon
