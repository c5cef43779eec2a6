#include "gluon/std_compat/call_once.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gluon/std.h"
#include "gluon/sync/semaphore.h"
#include "test_support.h"

namespace gluon {
namespace {

namespace conc = std_compat;
using namespace std::chrono_literals;

class call_once_test : public test::engine_test {};
GLUON_ENGINE_TEST_SUITE(call_once_test);

// Constant-initialised, as std::once_flag is: usable from any static initialiser.
constinit conc::once_flag static_flag;

TEST_P(call_once_test, runs_the_callable_once_with_its_arguments) {
    conc::once_flag flag;
    int runs = 0, got = 0;
    std::vector<fiber> fs;
    for (int i = 0; i < 4; ++i)
        fs.push_back(*spawn([&, i] {
            conc::call_once(flag, [&](int v, int& out) {
                ++runs;
                out = v;
            }, i + 1, std::ref(got));
        }));
    for (auto& f : fs) ASSERT_TRUE(f.join());
    EXPECT_EQ(runs, 1);
    EXPECT_GE(got, 1);
    conc::once_flag moved_flag;
    int moved = 0;
    auto take = [&](std::unique_ptr<int> p) { moved = *p; };
    conc::call_once(moved_flag, take, std::make_unique<int>(7));
    conc::call_once(moved_flag, [&] { moved = -1; });
    EXPECT_EQ(moved, 7);
    static int static_runs = 0;  // this test runs once per engine: the flag is set after the first
    conc::call_once(static_flag, [] { ++static_runs; });
    EXPECT_EQ(static_runs, 1);
}

// As std's: an exception goes out to the caller and leaves the flag unset; a caller waiting for
// that run then runs the callable itself, and once a run returns, no later call runs it.
TEST_P(call_once_test, a_run_that_throws_leaves_the_flag_to_the_next_caller) {
    conc::once_flag flag;
    bool in_first = false, second_waits = false, first_threw = false, second_ran = false;
    auto first = spawn([&] {
        try {
            conc::call_once(flag, [&] {
                in_first = true;
                while (!second_waits) conc::this_thread::yield();
                throw std::runtime_error("first");
            });
        } catch (const std::runtime_error&) {
            first_threw = true;
        }
    });
    ASSERT_TRUE(first);
    while (!in_first) this_fiber::yield();
    second_waits = true;
    conc::call_once(flag, [&] { second_ran = true; });  // waits for the first run, then runs
    ASSERT_TRUE(first->join());
    EXPECT_TRUE(first_threw);
    EXPECT_TRUE(second_ran);
    bool third_ran = false;
    conc::call_once(flag, [&] { third_ran = true; });
    EXPECT_FALSE(third_ran);
}

// The callable parks (a sleep) while a second fiber of the same vCPU calls call_once: the second
// caller parks only its fiber, and the run goes on. std::call_once held the vCPU's thread in
// the second caller's wait, so the first run never resumed: the test hung to its timeout.
TEST_P(call_once_test, a_caller_waits_for_a_parked_run_on_the_same_vcpu) {
    conc::once_flag flag;
    int runs = 0;
    bool in_callable = false, second_calls = false;
    auto first = spawn([&] {
        conc::call_once(flag, [&] {
            in_callable = true;
            while (!second_calls) conc::this_thread::sleep_for(1ms);
            ++runs;
        });
    });
    ASSERT_TRUE(first);
    while (!in_callable) this_fiber::yield();
    second_calls = true;
    conc::call_once(flag, [&] { ++runs; });
    EXPECT_EQ(runs, 1);
    ASSERT_TRUE(first->join());
}

// std::call_once's wait cannot fail: an interrupt of a waiting caller leaves it waiting for the
// run, and stays pending for its next blocking call.
TEST_P(call_once_test, the_wait_for_a_run_keeps_an_interrupt_pending) {
    conc::once_flag flag;
    bool release = false, in_callable = false, waiting = false;
    bool second_ran = false, pending_after = false;
    auto first = spawn([&] {
        conc::call_once(flag, [&] {
            in_callable = true;
            while (!release) conc::this_thread::yield();
        });
    });
    ASSERT_TRUE(first);
    while (!in_callable) this_fiber::yield();
    auto second = spawn([&] {
        waiting = true;
        conc::call_once(flag, [&] { second_ran = true; });
        pending_after = this_fiber::interrupt_pending();
    });
    ASSERT_TRUE(second);
    while (!waiting) this_fiber::yield();  // one vCPU: the second caller is parked in call_once now
    ASSERT_TRUE(second->interrupt());
    release = true;
    ASSERT_TRUE(second->join());
    ASSERT_TRUE(first->join());
    EXPECT_FALSE(second_ran);
    EXPECT_TRUE(pending_after);
}

// Callers on two vCPUs and a plain thread: one run, and every caller returns after it, seeing
// what it did.
TEST_P(call_once_test, callers_on_two_vcpus_and_a_thread_share_one_run) {
    auto rt = runtime::start(test::test_runtime(2, GetParam()));
    ASSERT_TRUE(rt);
    conc::once_flag flag;
    std::atomic<int> runs{0}, calling{0}, saw{0};
    int value = 0;
    auto call = [&] {
        calling.fetch_add(1);
        conc::call_once(flag, [&] {
            // Hold the run until all three have called: the others wait for it.
            EXPECT_TRUE(test::eventually([&] { return calling.load() == 3; }));
            conc::this_thread::sleep_for(1ms);
            value = 42;
            runs.fetch_add(1);
        });
        if (value == 42) saw.fetch_add(1);
    };
    latch done(2);
    for (unsigned i = 0; i < 2; ++i)
        ASSERT_TRUE((*rt)->post(i, [&] {
            call();
            done.count_down();
        }));
    std::thread plain(call);
    ASSERT_TRUE(done.wait(30s));
    plain.join();
    EXPECT_EQ(runs.load(), 1);
    EXPECT_EQ(saw.load(), 3);
}

}  // namespace
}  // namespace gluon
