#include "gluon/std_compat/latch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "gluon/std.h"
#include "test_support.h"

namespace gluon {
namespace {

namespace conc = std_compat;
using namespace std::chrono_literals;

class latch_test : public test::engine_test {};
GLUON_ENGINE_TEST_SUITE(latch_test);

static_assert(conc::latch::max() >= 1'000'000);

// Constant-initialised, as std::latch is.
constinit conc::latch static_latch(1);

TEST_P(latch_test, counts_down_to_zero) {
    conc::latch l(3);
    EXPECT_FALSE(l.try_wait());
    l.count_down(2);
    EXPECT_FALSE(l.try_wait());
    l.count_down();
    EXPECT_TRUE(l.try_wait());
    l.wait();
    const conc::latch& done = l;  // std's wait and try_wait are const
    done.wait();
    EXPECT_TRUE(done.try_wait());
    static_latch.count_down(0);
    EXPECT_FALSE(static_latch.try_wait());
}

// The fibers that count the latch down run on the vCPU of the one that waits: wait parks only
// its fiber. std::latch::wait held the vCPU's thread, so they never ran: the test hung to its
// timeout (in the first wait, and in the first arrive_and_wait).
TEST_P(latch_test, fibers_of_the_same_vcpu_count_down_a_waiting_latch) {
    conc::latch l(1);
    auto f = spawn([&] {
        conc::this_thread::sleep_for(1ms);
        l.count_down();
    });
    ASSERT_TRUE(f);
    l.wait();
    ASSERT_TRUE(f->join());

    constexpr int n = 3;
    conc::latch all(n);
    int arrived = 0, saw_all = 0;
    std::vector<fiber> fs;
    for (int i = 0; i < n; ++i)
        fs.push_back(*spawn([&] {
            ++arrived;
            all.arrive_and_wait();
            if (arrived == n) ++saw_all;
        }));
    for (auto& g : fs) ASSERT_TRUE(g.join());
    EXPECT_EQ(saw_all, n);
}

// std::latch::wait cannot fail for an interrupt: it waits on, and the interrupt stays pending
// for the waiter's next blocking call.
TEST_P(latch_test, wait_keeps_an_interrupt_pending) {
    conc::latch l(1);
    bool waiting = false, returned = false, pending_after = false;
    auto g = spawn([&] {
        waiting = true;
        l.wait();
        returned = true;
        pending_after = this_fiber::interrupt_pending();
    });
    ASSERT_TRUE(g);
    while (!waiting) this_fiber::yield();  // one vCPU: the waiter is parked now
    ASSERT_TRUE(g->interrupt());
    this_fiber::yield();
    EXPECT_FALSE(returned);
    l.count_down();
    ASSERT_TRUE(g->join());
    EXPECT_TRUE(returned);
    EXPECT_TRUE(pending_after);
}

// Fibers on two vCPUs and a plain thread meet at one latch: none goes on before all have come.
TEST_P(latch_test, fibers_of_two_vcpus_and_a_thread_meet) {
    auto rt = runtime::start(test::test_runtime(2, GetParam()));
    ASSERT_TRUE(rt);
    conc::latch meet(3);
    std::atomic<int> arrived{0}, saw_all{0};
    auto arrive = [&] {
        arrived.fetch_add(1);
        meet.arrive_and_wait();
        if (arrived.load() == 3) saw_all.fetch_add(1);
    };
    gluon::latch done(2);
    for (unsigned i = 0; i < 2; ++i)
        ASSERT_TRUE((*rt)->post(i, [&] {
            arrive();
            done.count_down();
        }));
    std::thread plain(arrive);
    ASSERT_TRUE(done.wait(30s));
    plain.join();
    EXPECT_EQ(saw_all.load(), 3);
}

}  // namespace
}  // namespace gluon
