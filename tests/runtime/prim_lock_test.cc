#include "gluon/runtime/prim_lock.h"

#include <gtest/gtest.h>

#include <thread>

#include "gluon/runtime/fiber.h"
#include "gluon/runtime/runtime.h"
#include "gluon/sync.h"
#include "test_support.h"

namespace gluon {
namespace {

using namespace std::chrono_literals;

TEST(prim_lock, stays_biased_on_one_vcpu) {
    ASSERT_TRUE(init({.log_engine = false}));
    prim_lock lk;
    for (int i = 0; i < 100; ++i) {
        lk.lock();
        lk.unlock();
    }
    EXPECT_FALSE(lk.is_shared());
    ASSERT_TRUE(fini());
}

TEST(prim_lock, plain_thread_revokes_a_live_vcpus_bias) {
    auto rt = runtime::start(test::test_runtime(1));
    ASSERT_TRUE(rt);
    mutex m;
    long counter = 0;
    ASSERT_TRUE((*rt)->run(0, [&] {
        for (int i = 0; i < 1000; ++i) {
            std::lock_guard g(m);
            ++counter;
        }
    }));
    // The vCPU keeps using the mutex while this thread joins in: the bias must be revoked
    // without losing an increment.
    latch done(1);
    ASSERT_TRUE((*rt)->post(0, [&] {
        for (int i = 0; i < 20000; ++i) {
            std::lock_guard g(m);
            ++counter;
            if (i % 100 == 0) this_fiber::yield();
        }
        done.count_down();
    }));
    for (int i = 0; i < 20000; ++i) {
        std::lock_guard g(m);
        ++counter;
    }
    ASSERT_TRUE(done.wait(60s));
    std::lock_guard g(m);
    EXPECT_EQ(counter, 41000);
    EXPECT_TRUE(m.try_lock() == false);  // we hold it: the lock is shared now and still exclusive
}

TEST(prim_lock, bias_of_a_finished_vcpu_is_taken_over) {
    channel<int> ch(4);
    std::thread t([&] {
        ASSERT_TRUE(init({.log_engine = false}));
        ASSERT_TRUE(ch.send(1));
        ASSERT_TRUE(fini());
    });
    t.join();
    auto v = ch.recv(1s);  // this thread is no vCPU; the owner vCPU is gone
    ASSERT_TRUE(v);
    EXPECT_EQ(*v, 1);
}

TEST(prim_lock, channel_moves_from_one_vcpu_to_another) {
    auto rt = runtime::start(test::test_runtime(2));
    ASSERT_TRUE(rt);
    channel<int> ch(1);
    ASSERT_TRUE((*rt)->run(0, [&] { ASSERT_TRUE(ch.send(7)); }));
    auto got = (*rt)->call(1, [&] { return ch.recv(5s).value_or(-1); });
    ASSERT_TRUE(got);
    EXPECT_EQ(*got, 7);
}

}  // namespace
}  // namespace gluon
