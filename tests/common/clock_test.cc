#include "gluon/common/clock.h"

#include <gtest/gtest.h>

namespace gluon {
namespace {

using namespace std::chrono_literals;

TEST(clock, coarse_clock_lags_less_than_the_allowance_but_for_a_late_tick) {
    // timeout_deadline and timeout_left rely on it. The coarse clock moves at the timekeeping
    // CPU's tick: a tick that comes late (a virtual CPU the hypervisor did not run for a while)
    // lets it lag past any allowance for as long, and a timeout of a second or more read from it
    // meanwhile may then end that much early; rare, and a few milliseconds on a second.
    EXPECT_GT(coarse_lag_ns(), 0);
    // Each pair is read in the order that keeps the check true however long the thread is
    // preempted between the two reads.
    int late = 0;
    for (int i = 0; i < 100000; ++i) {
        const int64_t coarse = mono_coarse_ns();
        ASSERT_LE(coarse, mono_now_ns());
        const int64_t now = mono_now_ns();
        if (mono_coarse_ns() + coarse_lag_ns() < now) ++late;
    }
    EXPECT_LE(late, 100) << "of 100,000 readings, past the allowance";
}

TEST(clock, short_timeouts_are_exact) {
    const int64_t before = mono_now_ns();
    const deadline_t d = timeout_deadline(250ms);
    const int64_t after = mono_now_ns();
    EXPECT_GE(d, before + 250'000'000);
    EXPECT_LE(d, after + 250'000'000);
    const int64_t b2 = mono_now_ns();
    const deadline_t past = timeout_deadline(-5s);  // a negative timeout is "now"
    EXPECT_GE(past, b2);
    EXPECT_LE(past, mono_now_ns());
}

TEST(clock, durations_too_long_for_nanoseconds_saturate) {
    using namespace std::chrono;
    static_assert(to_duration(milliseconds::max()) == forever);
    static_assert(to_duration(hours::max()) == forever);
    static_assert(to_duration(milliseconds::min()) == duration::min());
    static_assert(to_duration(1500ms) == 1'500'000'000ns);
    static_assert(to_duration(-3us) == -3000ns);
    static_assert(to_duration(nanoseconds::max()) == forever);
    EXPECT_EQ(to_duration(std::chrono::duration<double>(1e300)), forever);
    EXPECT_EQ(to_duration(std::chrono::duration<double>(0.25)), 250ms);
    EXPECT_EQ(deadline_after(to_duration(milliseconds::max())), k_no_deadline);
    // A time point past what nanoseconds hold is no deadline; one before is now.
    EXPECT_EQ(deadline_at(time_point<steady_clock, seconds>::max()), k_no_deadline);
    EXPECT_EQ(deadline_at(steady_clock::time_point::max()), k_no_deadline);
    const int64_t before = mono_now_ns();
    const deadline_t past = deadline_at(time_point<steady_clock, seconds>::min());
    EXPECT_GE(past, before);
    EXPECT_LE(past, mono_now_ns());
    const deadline_t soon = deadline_at(steady_clock::now() + 1h);
    EXPECT_GE(soon, before + 3'600'000'000'000);
    EXPECT_LE(soon, mono_now_ns() + 3'600'000'000'000);
}

TEST(clock, long_timeouts_end_no_earlier_and_at_most_the_lag_later) {
    for (duration t : {duration(1s), duration(30s), duration(std::chrono::hours(24 * 365))}) {
        const int64_t before = mono_now_ns();
        const deadline_t d = timeout_deadline(t);
        const int64_t after = mono_now_ns();
        EXPECT_GE(d, before + t.count());
        EXPECT_LE(d, after + t.count() + coarse_lag_ns());
    }
    EXPECT_EQ(timeout_deadline(forever), k_no_deadline);
    EXPECT_EQ(timeout_deadline(duration(k_no_deadline - 1)), k_no_deadline);  // saturates
}

TEST(clock, timeout_left_is_the_smaller_of_the_step_and_what_is_left) {
    EXPECT_EQ(timeout_left(5s, k_no_deadline), duration(5s));
    EXPECT_EQ(timeout_left(k_no_deadline), forever);
    // Far off: the step's own timeout, exactly.
    EXPECT_EQ(timeout_left(30s, deadline_after(std::chrono::minutes(2))), duration(30s));
    // Near: what is left, exactly.
    const deadline_t near = deadline_after(300ms);
    const duration left = timeout_left(30s, near);
    EXPECT_LE(left, duration(300ms));
    EXPECT_GT(left, duration(0));
    EXPECT_LE(timeout_left(near), duration(300ms));
    // Passed: nothing.
    EXPECT_EQ(timeout_left(30s, mono_now_ns() - 1), duration(0));
    EXPECT_EQ(timeout_left(mono_now_ns() - 1), duration(0));
    // Far off with no step timeout: what is left, at most the lag over.
    const int64_t before = mono_now_ns();
    const duration far = timeout_left(before + 60'000'000'000);
    EXPECT_LE(far.count(), 60'000'000'000 + coarse_lag_ns());
    EXPECT_GE(far.count(), 60'000'000'000 - (mono_now_ns() - before));
}

TEST(clock, step_timeouts_give_the_first_step_the_whole_timeout) {
    step_timeouts s(30s);
    EXPECT_EQ(s.next(), duration(30s));
    const duration second = s.next();
    EXPECT_LE(second, duration(30s) + duration(coarse_lag_ns()));
    EXPECT_GT(second, duration(29s));
    EXPECT_EQ(step_timeouts(forever).deadline(), k_no_deadline);
}

TEST(clock, stall_timeouts_give_every_step_the_gap_within_their_deadline) {
    step_timeouts s(stall_timeout{300ms});
    for (int i = 0; i < 3; ++i) EXPECT_EQ(s.next(), duration(300ms));
    EXPECT_EQ(s.deadline(), k_no_deadline);
    // Far off, the deadline leaves each step the whole gap; near, what is left; passed, nothing.
    step_timeouts far(stall_timeout{300ms, deadline_after(std::chrono::minutes(2))});
    for (int i = 0; i < 3; ++i) EXPECT_EQ(far.next(), duration(300ms));
    const deadline_t near_deadline = deadline_after(100ms);
    step_timeouts near(stall_timeout{300ms, near_deadline});
    EXPECT_EQ(near.deadline(), near_deadline);
    const duration left = near.next();
    EXPECT_LE(left, duration(100ms));
    EXPECT_GT(left, duration(0));
    step_timeouts passed(stall_timeout{300ms, mono_now_ns() - 1});
    EXPECT_EQ(passed.next(), duration(0));
}

}  // namespace
}  // namespace gluon
