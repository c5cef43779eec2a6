#include "gluon/std_compat/jthread.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stop_token>
#include <system_error>

#include "gluon/std.h"
#include "gluon/sync/semaphore.h"
#include "test_support.h"

namespace gluon {
namespace {

namespace conc = std_compat;
using namespace std::chrono_literals;

class jthread_test : public test::engine_test {};
GLUON_ENGINE_TEST_SUITE(jthread_test);

// Waits, yielding, until its thread is asked to stop.
void until_stopped(std::stop_token st) {
    while (!st.stop_requested()) conc::this_thread::yield();
}

TEST_P(jthread_test, passes_a_stop_token_to_a_callable_that_takes_one) {
    int got = 0;
    conc::thread::id inner;
    conc::jthread with([&](std::stop_token st, int v) {
        got = st.stop_possible() ? v : -1;
        inner = conc::this_thread::get_id();
    }, 5);
    const auto id = with.get_id();
    EXPECT_NE(id, conc::jthread::id());
    with.join();
    EXPECT_EQ(got, 5);
    EXPECT_EQ(inner, id);
    EXPECT_FALSE(with.joinable());
    conc::jthread without([&](int v) { got = v; }, 7);
    without.join();
    EXPECT_EQ(got, 7);
    EXPECT_THROW(without.join(), std::system_error);
}

TEST_P(jthread_test, destruction_asks_the_thread_to_stop_and_joins_it) {
    int rounds = 0;
    bool ended = false;
    {
        conc::jthread t([&](std::stop_token st) {
            while (!st.stop_requested()) {
                ++rounds;
                conc::this_thread::sleep_for(1ms);
            }
            ended = true;
        });
        while (rounds == 0) this_fiber::yield();
    }
    EXPECT_TRUE(ended);
}

TEST_P(jthread_test, stop_requests_and_callbacks) {
    conc::jthread t(until_stopped);
    EXPECT_TRUE(t.get_stop_token().stop_possible());
    EXPECT_FALSE(t.get_stop_token().stop_requested());
    bool called = false;
    std::stop_callback cb(t.get_stop_token(), [&] { called = true; });
    EXPECT_TRUE(t.request_stop());
    EXPECT_TRUE(called);
    EXPECT_FALSE(t.request_stop());  // made already
    EXPECT_FALSE(t.get_stop_source().request_stop());
    EXPECT_TRUE(t.get_stop_token().stop_requested());
    t.join();

    conc::jthread empty;
    EXPECT_FALSE(empty.joinable());
    EXPECT_EQ(empty.get_id(), conc::jthread::id());
    EXPECT_FALSE(empty.get_stop_source().stop_possible());
    EXPECT_FALSE(empty.request_stop());
    EXPECT_THROW(empty.join(), std::system_error);
    conc::jthread d([] {});
    d.detach();
    EXPECT_FALSE(d.joinable());
}

// Move assignment onto a joinable jthread asks its thread to stop and joins it first; the
// moved-from one is left with no thread and no stop state.
TEST_P(jthread_test, move_assignment_ends_the_thread_it_replaces) {
    bool first_ended = false;
    conc::jthread a([&](std::stop_token st) {
        until_stopped(st);
        first_ended = true;
    });
    conc::jthread b(until_stopped);
    const auto b_id = b.get_id();
    a = std::move(b);
    EXPECT_TRUE(first_ended);
    EXPECT_EQ(a.get_id(), b_id);
    // NOLINTNEXTLINE(bugprone-use-after-move): std defines the moved-from state
    EXPECT_FALSE(b.joinable());
    EXPECT_FALSE(b.get_stop_source().stop_possible());
    conc::jthread c(std::move(a));
    EXPECT_FALSE(a.joinable());  // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(c.get_id(), b_id);
    swap(a, c);
    EXPECT_EQ(a.get_id(), b_id);
}  // a's destructor asks b's thread to stop and joins it

// The thread waits for a fiber of the vCPU that joins it: join parks only the joining fiber.
// std::jthread::join held the vCPU's thread, so that fiber never ran and the thread waited for
// ever: the test hung to its timeout.
TEST_P(jthread_test, join_lets_the_fibers_of_its_vcpu_run) {
    conc::latch go(1);
    bool body_done = false;
    conc::jthread t([&] {
        go.wait();
        body_done = true;
    });
    auto counter = spawn([&] {
        conc::this_thread::sleep_for(1ms);
        go.count_down();
    });
    ASSERT_TRUE(counter);
    t.join();
    EXPECT_TRUE(body_done);
    ASSERT_TRUE(counter->join());
}

// A stop requested on another vCPU reaches the thread, through a std::stop_callback that wakes
// it from its wait on a semaphore.
TEST_P(jthread_test, a_stop_requested_on_another_vcpu_wakes_the_thread) {
    auto rt = runtime::start(test::test_runtime(2, GetParam()));
    ASSERT_TRUE(rt);
    std::stop_source source(std::nostopstate);
    conc::binary_semaphore handed(0);
    std::atomic<bool> saw_stop{false}, requested{false};
    latch done(2);
    ASSERT_TRUE((*rt)->post(0, [&] {
        conc::jthread t([&](std::stop_token st) {
            conc::binary_semaphore stopped(0);
            std::stop_callback cb(st, [&] { stopped.release(); });
            saw_stop = stopped.try_acquire_for(10s) && st.stop_requested();
        });
        source = t.get_stop_source();
        handed.release();
        t.join();
        done.count_down();
    }));
    ASSERT_TRUE((*rt)->post(1, [&] {
        if (handed.try_acquire_for(10s)) requested = source.request_stop();
        done.count_down();
    }));
    ASSERT_TRUE(done.wait(30s));
    EXPECT_TRUE(requested.load());
    EXPECT_TRUE(saw_stop.load());
}

}  // namespace
}  // namespace gluon
