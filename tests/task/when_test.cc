// when_all, when_any and task_group.
#include "gluon/task/when.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <stdexcept>
#include <string>

#include "gluon/runtime/fd.h"
#include "gluon/task/io.h"
#include "test_support.h"

namespace gluon {
namespace {

using namespace std::chrono_literals;

class task_when_test : public test::engine_test {};

task<int> after(std::chrono::milliseconds d, int v) {
    auto r = co_await co::sleep_for(d);
    co_return r ? v : -1;  // -1: cancelled
}
task<void> nothing() { co_return; }
task<std::string> text() { co_return "t"; }
task<int> throws_after(std::chrono::milliseconds d) {
    (void)co_await co::sleep_for(d);
    throw std::runtime_error("child");
}

TEST_P(task_when_test, when_all_gives_every_value_in_order) {
    auto t = []() -> task<std::string> {
        auto [a, b, c] = co_await when_all(after(20ms, 1), nothing(), text());
        (void)b;
        co_return std::to_string(a) + c;
    };
    EXPECT_EQ(block_on(t()).value(), "1t");
    auto v = []() -> task<int> {
        std::vector<task<int>> ts;
        for (int i = 0; i < 10; ++i) ts.push_back(after(std::chrono::milliseconds(10 - i), i));
        auto out = co_await when_all(std::move(ts));
        int s = 0;
        for (size_t i = 0; i < out.size(); ++i) s += out[i] == static_cast<int>(i);
        co_return s;
    };
    EXPECT_EQ(block_on(v()).value(), 10);
}

TEST_P(task_when_test, when_all_awaits_the_others_then_rethrows) {
    int late = 0;
    auto t = [](int* l) -> task<void> {
        auto slow = [](int* x) -> task<void> {
            (void)co_await co::sleep_for(30ms);
            *x = 1;
        };
        (void)co_await when_all(throws_after(1ms), slow(l));
    };
    EXPECT_THROW((void)block_on(t(&late)), std::runtime_error);
    EXPECT_EQ(late, 1);  // awaited before the exception came out
}

TEST_P(task_when_test, when_any_cancels_and_awaits_the_losers) {
    int sockets[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets), 0);
    int loser_result = 0;
    auto t = [](int fd, int* lr) -> task<std::pair<size_t, int>> {
        auto reader = [](int f, int* out) -> task<int> {
            char b[4];
            auto r = co_await co::recv_some(f, b, sizeof b);
            *out = r ? 0 : r.error().value();
            co_return 0;
        };
        auto r = co_await when_any(reader(fd, lr), after(10ms, 7));
        co_return r.value();
    };
    auto [idx, v] = block_on(t(sockets[0], &loser_result)).value();
    EXPECT_EQ(idx, 1u);
    EXPECT_EQ(v, 7);
    EXPECT_EQ(loser_result, ECANCELED);  // the recv was cancelled and ended before when_any did
    (void)fd::close(sockets[0]);
    (void)fd::close(sockets[1]);
}

TEST_P(task_when_test, when_any_of_no_task_fails_at_once) {
    // None would ever end: it waited until its caller was cancelled.
    auto t = []() -> task<int> {
        auto r = co_await when_any(std::vector<task<int>>{});
        co_return r ? 0 : r.error().value();
    };
    auto h = co_spawn(t()).value();
    auto r = h.join_for(10s);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(*r, EINVAL);
}

TEST_P(task_when_test, a_group_joins_its_children_and_cancels_them) {
    auto t = []() -> task<int> {
        int done = 0;
        task_group g;
        auto child = [](int* d, std::chrono::milliseconds ms) -> task<void> {
            if (co_await co::sleep_for(ms)) ++*d;
        };
        for (int i = 0; i < 5; ++i) EXPECT_TRUE(g.spawn(child(&done, 1ms)));
        co_await g.join();
        EXPECT_EQ(done, 5);
        for (int i = 0; i < 5; ++i) EXPECT_TRUE(g.spawn(child(&done, 10s)));
        co_await co::yield();
        g.cancel();
        co_await g.join();
        co_return done;
    };
    EXPECT_EQ(block_on(t()).value(), 5);
}

task<void> bump(int* d) {
    ++*d;
    co_return;
}
task<void> spawns_into(task_group* g, int* d, int n) {
    for (int i = 0; i < n; ++i) EXPECT_TRUE(g->spawn(bump(d)));
    co_return;
}

TEST_P(task_when_test, a_group_join_awaits_children_spawned_while_it_waits) {
    // The child spawns 100 more into its group while join() awaits it: join must await those
    // too (they have not run when the child ends), and the handle it awaits must not move as
    // the group grows (it was freed with the group's first array, and join read it after).
    auto t = []() -> task<int> {
        int done = 0;
        task_group g;
        EXPECT_TRUE(g.spawn(spawns_into(&g, &done, 100)));
        co_await g.join();
        co_return done;
    };
    EXPECT_EQ(block_on(t()).value(), 100);
}

TEST_P(task_when_test, cancelling_the_parent_cancels_a_group_join) {
    std::stop_source src;
    auto t = []() -> task<int> {
        int cancelled = 0;
        task_group g;
        auto child = [](int* c) -> task<void> {
            if (!co_await co::sleep_for(10s)) ++*c;
        };
        for (int i = 0; i < 3; ++i) EXPECT_TRUE(g.spawn(child(&cancelled)));
        co_await g.join();
        co_return cancelled;
    };
    auto h = co_spawn(t(), {.stop = src.get_token()}).value();
    auto f = spawn([&] {
        (void)this_fiber::sleep_for(5ms);
        src.request_stop();
    });
    EXPECT_EQ(h.join(), 3);
    ASSERT_TRUE(f->join());
}

// Three children that sleep until cancelled, then wind down for 200 ms each: a blocking
// cleanup in a helper fiber, which the cancel does not cut short.
struct wind_down_log {
    int started = 0;
    event all_started;
    int seen = 0;                // children that saw their cancel
    int seen_at_first_end = -1;  // `seen` when the first of them had wound down
};

task<int> winds_down(wind_down_log* log) {
    if (++log->started == 3) log->all_started.set();
    auto r = co_await co::sleep_for(10s);
    if (r || r.error().value() != ECANCELED) co_return -1;
    ++log->seen;
    (void)co_await co::in_fiber([] {
        const deadline_t end = deadline_after(200ms);
        while (!this_fiber::sleep_until(end)) {
        }  // the task's cancel interrupted the fiber: sleep on to the end
    });
    if (log->seen_at_first_end < 0) log->seen_at_first_end = log->seen;
    co_return 0;
}

// Spawns parent(log), cancels it once its three children sleep, and gives what it returned.
template <typename Parent>
int cancel_when_started(Parent parent, wind_down_log& log) {
    auto h = co_spawn(parent(&log)).value();
    EXPECT_TRUE(log.all_started.wait());
    h.cancel();
    return h.join();
}

TEST_P(task_when_test, cancelling_the_caller_cancels_every_child_of_a_when_all_at_once) {
    // Each child saw its cancel before the first had wound down: they wound down together.
    // Cancelled one by one, as the join reached each, the first ended alone (600 ms in all).
    wind_down_log in_vector;
    auto v = [](wind_down_log* l) -> task<int> {
        std::vector<task<int>> ts;
        for (int i = 0; i < 3; ++i) ts.push_back(winds_down(l));
        auto out = co_await when_all(std::move(ts));
        co_return out[0] + out[1] + out[2];
    };
    EXPECT_EQ(cancel_when_started(v, in_vector), 0);
    EXPECT_EQ(in_vector.seen, 3);
    EXPECT_EQ(in_vector.seen_at_first_end, 3);

    wind_down_log in_tuple;
    auto t = [](wind_down_log* l) -> task<int> {
        auto [a, b, c] = co_await when_all(winds_down(l), winds_down(l), winds_down(l));
        co_return a + b + c;
    };
    EXPECT_EQ(cancel_when_started(t, in_tuple), 0);
    EXPECT_EQ(in_tuple.seen, 3);
    EXPECT_EQ(in_tuple.seen_at_first_end, 3);
}

TEST_P(task_when_test, cancelling_the_caller_cancels_every_child_of_a_group_join_at_once) {
    wind_down_log log;
    auto t = [](wind_down_log* l) -> task<int> {
        task_group g;
        for (int i = 0; i < 3; ++i) EXPECT_TRUE(g.spawn(winds_down(l)));
        co_await g.join();
        co_return 0;
    };
    EXPECT_EQ(cancel_when_started(t, log), 0);
    EXPECT_EQ(log.seen, 3);
    EXPECT_EQ(log.seen_at_first_end, 3);
}

TEST_P(task_when_test, a_when_all_in_a_cancelled_task_cancels_every_child_at_once) {
    // Cancelled before the joins began: the first join used to cancel only its own child.
    wind_down_log log;
    auto t = [](wind_down_log* l) -> task<int> {
        std::vector<task<int>> ts;
        for (int i = 0; i < 3; ++i) ts.push_back(winds_down(l));
        auto out = co_await when_all(std::move(ts));
        co_return out[0] + out[1] + out[2];
    };
    std::stop_source src;
    src.request_stop();
    auto h = co_spawn(t(&log), {.stop = src.get_token()}).value();
    EXPECT_EQ(h.join(), 0);
    EXPECT_EQ(log.seen, 3);
    EXPECT_EQ(log.seen_at_first_end, 3);
}

GLUON_ENGINE_TEST_SUITE(task_when_test);

}  // namespace
}  // namespace gluon
