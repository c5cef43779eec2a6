#include "gluon/std_compat/barrier.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "gluon/std.h"
#include "gluon/sync/semaphore.h"
#include "test_support.h"

namespace gluon {
namespace {

namespace conc = std_compat;
using namespace std::chrono_literals;

class barrier_test : public test::engine_test {};
GLUON_ENGINE_TEST_SUITE(barrier_test);

static_assert(conc::barrier<>::max() >= 1'000'000);

// Constant-initialised, as std::barrier is.
constinit conc::barrier<> static_barrier(1);

// Fibers of one vCPU go through phases together; the completion function runs once per phase,
// after every arrival of the phase and before any of them goes on. std::barrier held the vCPU's
// thread in the first arrive_and_wait, so the other fibers never arrived: the test hung to its
// timeout.
TEST_P(barrier_test, fibers_of_the_same_vcpu_go_through_phases_together) {
    constexpr int n = 3, phases = 5;
    int work[n] = {}, completions = 0, out_of_step = 0;
    conc::barrier b(n, [&]() noexcept {
        for (int w : work)
            if (w != completions + 1) ++out_of_step;
        ++completions;
    });
    std::vector<fiber> fs;
    for (int i = 0; i < n; ++i)
        fs.push_back(*spawn([&, i] {
            for (int p = 0; p < phases; ++p) {
                ++work[i];
                if (i == 0) conc::this_thread::sleep_for(1ms);  // the others wait, parked
                b.arrive_and_wait();
                if (completions != p + 1) ++out_of_step;
            }
        }));
    for (auto& f : fs) ASSERT_TRUE(f.join());
    EXPECT_EQ(completions, phases);
    EXPECT_EQ(out_of_step, 0);
    static_barrier.arrive_and_wait();  // one arrival expected: the phase ends at once
}

// arrive counts `update` arrivals and returns a token that wait takes; a token of a phase that
// has ended is waited for at once.
TEST_P(barrier_test, arrive_then_wait_for_the_phase) {
    int completions = 0;
    conc::barrier b(3, [&]() noexcept { ++completions; });
    auto t = b.arrive(2);
    EXPECT_EQ(completions, 0);
    bool other_done = false;
    auto f = spawn([&] {
        b.arrive_and_wait();
        other_done = true;
    });
    ASSERT_TRUE(f);
    b.wait(std::move(t));  // parks until the other fiber's arrival ends the phase
    EXPECT_EQ(completions, 1);
    ASSERT_TRUE(f->join());
    EXPECT_TRUE(other_done);
    auto late = b.arrive(3);  // the whole of phase 1 at once: it has ended before the wait
    EXPECT_EQ(completions, 2);
    b.wait(std::move(late));
}

// arrive_and_drop arrives once in this phase and is expected in none after it.
TEST_P(barrier_test, arrive_and_drop_leaves_the_barrier) {
    int completions = 0;
    conc::barrier b(3, [&]() noexcept { ++completions; });
    auto stays = spawn([&] {
        b.arrive_and_wait();  // phase 0: three arrivals
        b.arrive_and_wait();  // phase 1: two
    });
    ASSERT_TRUE(stays);
    b.arrive_and_drop();
    EXPECT_EQ(completions, 0);
    b.arrive_and_wait();
    EXPECT_EQ(completions, 1);
    b.arrive_and_wait();
    EXPECT_EQ(completions, 2);
    ASSERT_TRUE(stays->join());
}

// std::barrier's wait cannot fail for an interrupt: it waits for the phase to end, and the
// interrupt stays pending for the waiter's next blocking call.
TEST_P(barrier_test, wait_keeps_an_interrupt_pending) {
    conc::barrier b(2);
    bool waiting = false, returned = false, pending_after = false;
    auto g = spawn([&] {
        waiting = true;
        b.arrive_and_wait();
        returned = true;
        pending_after = this_fiber::interrupt_pending();
    });
    ASSERT_TRUE(g);
    while (!waiting) this_fiber::yield();  // one vCPU: the waiter is parked now
    ASSERT_TRUE(g->interrupt());
    this_fiber::yield();
    EXPECT_FALSE(returned);
    (void)b.arrive();
    ASSERT_TRUE(g->join());
    EXPECT_TRUE(returned);
    EXPECT_TRUE(pending_after);
}

// Fibers on two vCPUs and a plain thread go through phases together.
TEST_P(barrier_test, fibers_of_two_vcpus_and_a_thread_go_through_phases_together) {
    auto rt = runtime::start(test::test_runtime(2, GetParam()));
    ASSERT_TRUE(rt);
    constexpr int phases = 100;
    std::atomic<int> completions{0}, out_of_step{0};
    conc::barrier b(3, [&]() noexcept { completions.fetch_add(1); });
    auto run = [&] {
        for (int p = 0; p < phases; ++p) {
            b.arrive_and_wait();
            if (completions.load() != p + 1) out_of_step.fetch_add(1);
        }
    };
    latch done(2);
    for (unsigned i = 0; i < 2; ++i)
        ASSERT_TRUE((*rt)->post(i, [&] {
            run();
            done.count_down();
        }));
    std::thread plain(run);
    ASSERT_TRUE(done.wait(60s));
    plain.join();
    EXPECT_EQ(completions.load(), phases);
    EXPECT_EQ(out_of_step.load(), 0);
}

}  // namespace
}  // namespace gluon
