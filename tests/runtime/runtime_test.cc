#include "gluon/runtime/runtime.h"

#include <gtest/gtest.h>

#include <pthread.h>

#include <condition_variable>
#include <cstdlib>
#include <future>
#include <mutex>
#include <vector>
#include <memory>
#include <new>

#include <atomic>

#include "gluon/runtime/fiber.h"
#include "gluon/runtime/oneshot.h"
#include "gluon/runtime/vcpu_call.h"
#include "gluon/sync.h"
#include "test_support.h"

namespace gluon {
namespace {

using namespace std::chrono_literals;

class runtime_test : public ::testing::TestWithParam<engine::kind> {
protected:
    void SetUp() override {
        if (!engine::available(GetParam())) GTEST_SKIP();
        auto r = runtime::start(test::test_runtime(2, GetParam()));
        ASSERT_TRUE(r);
        rt_ = std::move(*r);
    }
    std::unique_ptr<runtime> rt_;
};
GLUON_ENGINE_TEST_SUITE(runtime_test);

TEST_P(runtime_test, run_and_call_execute_on_the_named_vcpu) {
    for (unsigned i = 0; i < rt_->size(); ++i) {
        auto idx = rt_->call(i, [] { return current_vcpu_index(); });
        ASSERT_TRUE(idx);
        EXPECT_EQ(vcpu_handle::current(), vcpu_handle());  // the test thread is no vCPU
        auto same = rt_->call(i, [&] { return vcpu_handle::current() == rt_->vcpu(i); });
        EXPECT_TRUE(*same);
    }
    EXPECT_EQ(rt_->post(99, [] {}).error(), std::errc::invalid_argument);
}

TEST_P(runtime_test, run_fails_when_the_fiber_cannot_be_made) {
    // A stack larger than any address space cannot be mapped: fn never runs, and run() says so
    // (it returned success, and call() then read a value fn never gave).
    bool ran = false;
    auto r = rt_->run(0, {.stack_size = size_t{1} << 62}, [&] { ran = true; });
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::not_enough_memory);
    EXPECT_FALSE(ran);
    EXPECT_TRUE(rt_->run(0, [&] { ran = true; }));  // the vCPU is fine after
    EXPECT_TRUE(ran);
}

TEST_P(runtime_test, channel_ping_pong_across_vcpus) {
    channel<int> ping, pong;
    latch done(2);
    ASSERT_TRUE(rt_->post(0, [&] {
        for (int i = 0; i < 1000; ++i) {
            ASSERT_TRUE(ping.send(i));
            ASSERT_EQ(*pong.recv(), i);
        }
        done.count_down();
    }));
    ASSERT_TRUE(rt_->post(1, [&] {
        for (int i = 0; i < 1000; ++i) ASSERT_TRUE(pong.send(*ping.recv()));
        done.count_down();
    }));
    ASSERT_TRUE(done.wait(30s));
}

TEST_P(runtime_test, vcpus_asleep_wake_each_other_for_every_message) {
    // No idle spin: each message finds the other vCPU asleep in the kernel, so every one is a
    // wake-up from one vCPU's thread to the other's (io_uring: a MSG_RING from the sender's own
    // ring; epoll: the eventfd). A lost wake-up fails a receive's timeout instead of hanging.
    auto o = test::test_runtime(2, GetParam());
    o.vcpu.idle_spin_us = 0;
    auto rt = runtime::start(o);
    ASSERT_TRUE(rt);
    channel<int> ping, pong;
    std::atomic<int> echoed{0};
    latch done(2);
    ASSERT_TRUE((*rt)->post(0, [&] {
        for (int i = 0; i < 300; ++i) {
            ASSERT_TRUE(ping.send(i, 10s));
            auto back = pong.recv(10s);
            ASSERT_TRUE(back) << "message " << i;
            ASSERT_EQ(*back, i);
        }
        done.count_down();
    }));
    ASSERT_TRUE((*rt)->post(1, [&] {
        for (int i = 0; i < 300; ++i) {
            auto v = ping.recv(10s);
            ASSERT_TRUE(v) << "message " << i;
            ASSERT_TRUE(pong.send(*v, 10s));
            echoed.fetch_add(1);
        }
        done.count_down();
    }));
    ASSERT_TRUE(done.wait(60s));
    EXPECT_EQ(echoed.load(), 300);
}

TEST_P(runtime_test, fiber_migrates_between_vcpus) {
    auto r = rt_->call(0, [&] {
        int before = current_vcpu_index();
        EXPECT_TRUE(this_fiber::migrate_to(rt_->vcpu(1)));
        int after = current_vcpu_index();
        EXPECT_TRUE(this_fiber::sleep_for(1ms));  // blocking works on the new vCPU
        EXPECT_TRUE(this_fiber::migrate_to(rt_->vcpu(0)));
        return std::make_pair(before, after);
    });
    ASSERT_TRUE(r);
    EXPECT_NE(r->first, r->second);
}

TEST_P(runtime_test, cross_vcpu_interrupt_and_join) {
    std::atomic<fiber*> target{nullptr};
    fiber f;
    std::error_code got;
    ASSERT_TRUE(rt_->run(0, [&] {
        f = *spawn([&] { got = this_fiber::sleep_for(1h).error(); });
    }));
    ASSERT_TRUE(rt_->run(1, [&] {
        this_fiber::yield();
        EXPECT_TRUE(f.interrupt());
        EXPECT_TRUE(f.join());
    }));
    EXPECT_EQ(got, std::errc::operation_canceled);
}

// A vcpu_timer whose callback signals a oneshot, waited on by the test's thread.
struct signalling_timer : vcpu_timer {
    oneshot fired;
    static void fire(vcpu_timer* self) noexcept { static_cast<signalling_timer*>(self)->fired.signal(); }
};

TEST_P(runtime_test, a_timer_armed_again_on_another_vcpu_fails_with_exdev) {
    // Misuse, made harmless: armed on vCPU 1 while armed on vCPU 0, the timer went into both
    // vCPUs' heaps (one of them later fired it while the other kept it, or spun on it for ever).
    ::setenv("GLUON_MISUSE_ABORT", "0", 1);
    signalling_timer t;
    ASSERT_TRUE(rt_->run(0, [&] { ASSERT_TRUE(t.arm(k_no_deadline, signalling_timer::fire)); }));
    result<void> again;
    ASSERT_TRUE(rt_->run(1, [&] { again = t.arm(k_no_deadline, signalling_timer::fire); }));
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error(), std::errc::cross_device_link);
    EXPECT_TRUE(t.armed());  // still on vCPU 0
    t.disarm();              // from this thread, no vCPU: reported, and vCPU 0 takes it off
    EXPECT_FALSE(t.armed());
    ASSERT_TRUE(rt_->run(1, [&] { ASSERT_TRUE(t.arm(mono_now_ns(), signalling_timer::fire)); }));
    t.fired.wait();  // fires on vCPU 1, where it is now
    ::unsetenv("GLUON_MISUSE_ABORT");
}

std::atomic<bool> g_timer_destroyed{false};
std::atomic<bool> g_fired_after_destruction{false};

TEST_P(runtime_test, a_timer_destroyed_on_another_vcpu_never_fires_after) {
    // Misuse, made harmless: destroyed on vCPU 1, a timer armed on vCPU 0 stayed in vCPU 0's
    // heap and fired there after its destructor (the storage is kept here to see it).
    ::setenv("GLUON_MISUSE_ABORT", "0", 1);
    alignas(vcpu_timer) unsigned char storage[sizeof(vcpu_timer)];
    auto* t = new (storage) vcpu_timer;
    const deadline_t due = deadline_after(200ms);
    ASSERT_TRUE(rt_->run(0, [&] {
        ASSERT_TRUE(t->arm(due, [](vcpu_timer*) noexcept {
            if (g_timer_destroyed.load()) g_fired_after_destruction = true;
        }));
    }));
    ASSERT_TRUE(rt_->run(1, [&] { t->~vcpu_timer(); }));
    g_timer_destroyed = true;
    // Timers fire in deadline order: once this later one has fired, vCPU 0 has passed t's
    // deadline and would have fired t had its heap still held it.
    signalling_timer later;
    ASSERT_TRUE(rt_->run(0, [&] { ASSERT_TRUE(later.arm(due + 1'000'000, signalling_timer::fire)); }));
    later.fired.wait();
    EXPECT_FALSE(g_fired_after_destruction.load());
    ::unsetenv("GLUON_MISUSE_ABORT");
}

TEST_P(runtime_test, mutex_contended_from_both_vcpus) {
    mutex m;
    long counter = 0;
    latch done(8);
    for (int i = 0; i < 8; ++i)
        ASSERT_TRUE(rt_->post(i % 2, [&] {
            for (int k = 0; k < 2000; ++k) {
                std::lock_guard g(m);
                ++counter;
                if (k % 64 == 0) this_fiber::yield();
            }
            done.count_down();
        }));
    ASSERT_TRUE(done.wait(60s));
    EXPECT_EQ(counter, 16000);
}

TEST(work_pool, async_and_call) {
    auto pool = work_pool::create(2);
    ASSERT_TRUE(pool);
    std::atomic<int> n{0};
    wait_group wg;
    wg.add(10);
    for (int i = 0; i < 10; ++i) ASSERT_TRUE((*pool)->async([&] { ++n; wg.done(); }));
    ASSERT_TRUE(wg.wait(30s));
    ASSERT_TRUE((*pool)->call([&] { n += 100; }));
    EXPECT_EQ(n.load(), 110);
}

// The pool stops its vCPUs in order; a closure of the last one, interrupted by the stop, posts
// to the first, which has stopped (and may be gone): the post fails, and nothing is run.
TEST(work_pool, a_post_while_the_pool_stops_fails_with_eshutdown) {
    auto pool = work_pool::create(2);
    ASSERT_TRUE(pool);
    runtime* rt = &(*pool)->rt();
    std::error_code got;
    std::atomic<bool> ran{false};
    oneshot started;
    ASSERT_TRUE(rt->post(1, [&] {
        started.signal();
        (void)this_fiber::sleep_for(1h);  // until the pool stops
        got = rt->post(0, [&] { ran = true; }).error();
    }));
    started.wait();
    pool->reset();
    EXPECT_EQ(got.value(), ESHUTDOWN);
    EXPECT_FALSE(ran);
}

TEST(offload, runs_blocking_call_without_blocking_the_vcpu) {
    ASSERT_TRUE(init({.log_engine = false}));
    std::atomic<int> ticks{0};
    std::atomic<bool> stop{false};
    auto ticker = spawn([&] {
        while (!stop) {
            ++ticks;
            (void)this_fiber::sleep_for(1ms);
        }
    });
    // The blocking call waits until the vCPU has ticked on three times: that can only happen
    // if the vCPU keeps running fibers while the offload thread is blocked.
    bool vcpu_ran = offload_call([&] {
        int start = ticks.load();
        for (int i = 0; i < 10'000 && ticks.load() < start + 3; ++i) ::usleep(1000);
        return ticks.load() >= start + 3;
    });
    stop = true;
    ASSERT_TRUE(ticker->join());
    EXPECT_TRUE(vcpu_ran);
    ASSERT_TRUE(fini());
}

// A detached job owns what it captures and runs even though nobody waits for it; the caller
// can stop waiting (here: return at once) while it goes on.
// More blocking calls than the pool's base threads, each waiting until all of them have
// started: only a pool that grows runs them all at once (a fixed pool of 4 would leave four
// waiting for the others until their deadline).
TEST(offload, grows_past_its_base_threads_for_concurrent_blocking_calls) {
    ASSERT_TRUE(init({.log_engine = false}));
    constexpr int n = 12;
    std::mutex mu;
    std::condition_variable cv;
    int started = 0;
    std::atomic<int> all_met{0};
    std::vector<fiber> fs;
    for (int i = 0; i < n; ++i)
        fs.push_back(*spawn([&] {
            offload([&] {
                std::unique_lock lk(mu);
                ++started;
                cv.notify_all();
                if (cv.wait_for(lk, std::chrono::seconds(10), [&] { return started == n; }))
                    all_met.fetch_add(1);
            });
        }));
    for (auto& f : fs) ASSERT_TRUE(f.join());
    EXPECT_EQ(all_met.load(), n);
    ASSERT_TRUE(fini());
}

// A pool that has no thread and cannot start one (a thread or memory limit) runs the job on the
// caller: std::thread's std::system_error went through offload_call's noexcept callers (the
// psync file engine) and ended the process. Run in a fresh process, whose pool has no thread yet.
TEST(offload, runs_jobs_inline_when_no_thread_can_be_started) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    EXPECT_EXIT(
        {
            if (!init({.log_engine = false})) std::_Exit(2);
            // Every new thread's stack is larger than the address space: pthread_create fails.
            pthread_attr_t a;
            pthread_attr_init(&a);
            if (pthread_attr_setstacksize(&a, size_t{1} << 50) != 0 || pthread_setattr_default_np(&a) != 0)
                std::_Exit(3);
            const int got = offload_call([] { return 42; });
            bool ran = false;
            offload_detached([&ran] { ran = true; });
            std::_Exit(got == 42 && ran ? 0 : 1);
        },
        ::testing::ExitedWithCode(0), "");
}

TEST(offload, detached_jobs_run_and_own_their_state) {
    ASSERT_TRUE(init({.log_engine = false}));
    auto counter = std::make_shared<std::atomic<int>>(0);
    auto done = std::make_shared<counting_semaphore>(0);
    for (int i = 0; i < 20; ++i) {
        offload_detached([counter, done] {
            counter->fetch_add(1);
            done->release();
        });
    }
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(done->acquire(10s));
    EXPECT_EQ(counter->load(), 20);
    ASSERT_TRUE(fini());
    // Outside a vCPU too.
    auto flag = std::make_shared<std::atomic<bool>>(false);
    std::promise<void> p;
    auto fut = p.get_future();
    offload_detached([flag, &p] {
        flag->store(true);
        p.set_value();
    });
    ASSERT_EQ(fut.wait_for(10s), std::future_status::ready);
    EXPECT_TRUE(flag->load());
}

}  // namespace
}  // namespace gluon
