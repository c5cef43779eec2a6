#include "gluon/runtime/fiber.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gluon/runtime/fiber_local.h"
#include "gluon/runtime/runtime.h"
#include "gluon/runtime/vcpu_call.h"
#include "gluon/sync/channel.h"
#include "gluon/sync/semaphore.h"
#include "test_support.h"

namespace gluon {
namespace {

using namespace std::chrono_literals;

class fiber_test : public test::engine_test {};
GLUON_ENGINE_TEST_SUITE(fiber_test);

namespace {
__attribute__((noinline)) int deep_sum(int depth) {
    volatile char frame[8192];
    for (size_t i = 0; i < sizeof frame; i += 512) frame[i] = static_cast<char>(depth);
    int here = frame[depth % 16 * 512];
    return depth == 0 ? here : here + deep_sum(depth - 1);
}
}  // namespace

TEST_P(fiber_test, trim_stack_gives_back_deep_pages_and_the_fiber_goes_on) {
    this_fiber::trim_stack();  // the main fiber: a no-op
    int first = 0, again = 0;
    auto f = spawn([&] {
        first = deep_sum(16);  // about 136 KiB of frames
        this_fiber::trim_stack();
        again = deep_sum(16);  // the trimmed pages come back as zero pages, written again
    });
    ASSERT_TRUE(f);
    ASSERT_TRUE(f->join());
    EXPECT_EQ(first, again);
    EXPECT_EQ(first, 136);
}

TEST_P(fiber_test, stack_reports_the_fibers_own_stack) {
    EXPECT_EQ(this_fiber::stack().first, nullptr);  // the vCPU's thread stack: not a fiber's
    std::pair<void*, size_t> st{};
    bool holds_local = false;
    auto f = spawn(fiber_options{.stack_size = 64 * 1024}, [&] {
        st = this_fiber::stack();
        int local = 0;
        auto p = reinterpret_cast<uintptr_t>(&local), lo = reinterpret_cast<uintptr_t>(st.first);
        holds_local = p >= lo && p < lo + st.second;
    });
    ASSERT_TRUE(f);
    ASSERT_TRUE(f->join());
    EXPECT_TRUE(holds_local);
    EXPECT_GE(st.second, 64u * 1024);
}

TEST_P(fiber_test, runs_with_arguments_and_joins) {
    int out = 0;
    std::string s;
    auto f = spawn([&](int a, std::string b) { out = a; s = b; }, 42, std::string("hi"));
    ASSERT_TRUE(f.has_value());
    EXPECT_TRUE(f->joinable());
    ASSERT_TRUE(f->join().has_value());
    EXPECT_EQ(out, 42);
    EXPECT_EQ(s, "hi");
    EXPECT_FALSE(f->joinable());
}

TEST_P(fiber_test, yield_interleaves_in_fifo_order) {
    std::vector<int> trace;
    auto a = spawn([&] { for (int i = 0; i < 3; ++i) { trace.push_back(1); this_fiber::yield(); } });
    auto b = spawn([&] { for (int i = 0; i < 3; ++i) { trace.push_back(2); this_fiber::yield(); } });
    ASSERT_TRUE(a->join() && b->join());
    EXPECT_EQ(trace, (std::vector<int>{1, 2, 1, 2, 1, 2}));
}

// Fibers that only yield to each other (or hand off over a channel) must still let timers and
// I/O in: a sleeper's wake-up stops them. Without the periodic engine poll this never ends; the
// busy fibers give up after 3 s so that a regression fails instead of hanging.
// busy(stop, give_up) starts the busy fibers and returns them.
template <typename Busy>
void expect_timer_fires_amid(Busy busy) {
    bool stop = false;
    const int64_t t0 = mono_now_ns();
    std::vector<fiber> busy_fibers = busy(stop, t0 + 3'000'000'000);
    int64_t woke = 0;
    auto sleeper = spawn([&] {
        ASSERT_TRUE(this_fiber::sleep_for(5ms));
        woke = mono_now_ns();
        stop = true;
    });
    for (auto& f : busy_fibers) ASSERT_TRUE(f.join());
    ASSERT_TRUE(sleeper->join());
    EXPECT_LT(woke - t0, 1'000'000'000);  // long before the busy fibers give up
}

TEST_P(fiber_test, busy_fibers_do_not_starve_timers) {
    long spins = 0;
    expect_timer_fires_amid([&](bool& stop, int64_t give_up) {
        std::vector<fiber> fs;
        for (int i = 0; i < 2; ++i)
            fs.push_back(*spawn([&stop, &spins, give_up] {
                while (!stop && mono_now_ns() < give_up) {
                    ++spins;
                    this_fiber::yield();
                }
            }));
        return fs;
    });
    EXPECT_GT(spins, 0);
}

TEST_P(fiber_test, channel_ping_pong_does_not_starve_timers) {
    channel<int> ping, pong;
    expect_timer_fires_amid([&](bool& stop, int64_t give_up) {
        std::vector<fiber> fs;
        fs.push_back(*spawn([&stop, &ping, &pong, give_up] {
            while (!stop && mono_now_ns() < give_up) {
                ASSERT_TRUE(ping.send(1));
                ASSERT_TRUE(pong.recv());
            }
            ping.close();
        }));
        fs.push_back(*spawn([&] {
            while (auto v = ping.recv()) ASSERT_TRUE(pong.send(*v));
        }));
        return fs;
    });
}

TEST_P(fiber_test, join_twice_is_einval) {
    ::setenv("GLUON_MISUSE_ABORT", "0", 1);
    auto f = spawn([] {});
    ASSERT_TRUE(f->join());
    auto r = f->join();
    EXPECT_EQ(r.error(), std::errc::invalid_argument);
    ::unsetenv("GLUON_MISUSE_ABORT");
}

TEST_P(fiber_test, sleep_orders_by_deadline) {
    // What must hold on a loaded machine too: each sleeper sleeps at least its time, and they
    // wake in the order of their deadlines (which, if the vCPU lost the CPU between the two
    // calls, need not be the order of their durations).
    struct sleeper {
        int64_t deadline = 0, woke = 0;
    };
    sleeper s30, s5;
    std::vector<sleeper*> order;
    auto run = [&](sleeper& s, std::chrono::milliseconds d) {
        s.deadline = mono_now_ns() + std::chrono::nanoseconds(d).count();
        ASSERT_TRUE(this_fiber::sleep_for(d));
        s.woke = mono_now_ns();
        order.push_back(&s);
    };
    auto slow = spawn([&] { run(s30, 30ms); });
    auto fast = spawn([&] { run(s5, 5ms); });
    ASSERT_TRUE(slow->join() && fast->join());
    EXPECT_GE(s30.woke, s30.deadline);
    EXPECT_GE(s5.woke, s5.deadline);
    ASSERT_EQ(order.size(), 2u);
    EXPECT_LE(order[0]->deadline, order[1]->deadline);
}

TEST_P(fiber_test, interrupt_cancels_sleep_with_ecanceled) {
    std::error_code got;
    auto f = spawn([&] { got = this_fiber::sleep_for(10s).error(); });
    this_fiber::yield();  // let it park
    ASSERT_TRUE(f->interrupt());
    ASSERT_TRUE(f->join());
    EXPECT_EQ(got, std::errc::operation_canceled);
}

TEST_P(fiber_test, an_interrupted_sleep_whose_deadline_passes_before_it_runs_wakes_once) {
    // The interrupt makes the sleeper ready with its timer still armed; the deadline passes
    // before it runs, and the event loop fires that timer while it waits in the run queue. The
    // loop polls on one pick in 256, and one extra yield every other round moves that pick
    // across all of them. (Queued twice, the sleeper would be lost from the run queue and the
    // join would never return; debug builds trap at once.)
    int interrupted = 0;
    for (int i = 0; i < 1024; ++i) {
        if (i & 1) this_fiber::yield();
        std::error_code got;
        auto f = spawn([&] { got = this_fiber::sleep_for(200us).error(); });
        this_fiber::yield();  // let it park
        ASSERT_TRUE(f->interrupt());
        for (deadline_t until = deadline_after(250us); mono_now_ns() < until;) {
        }
        ASSERT_TRUE(f->join());
        // On a slow machine (a sanitizer) the deadline may come before the interrupt: that
        // round only slept.
        if (got) {
            ASSERT_EQ(got, std::errc::operation_canceled) << "round " << i;
            ++interrupted;
        }
    }
    EXPECT_GT(interrupted, 128) << interrupted << " of 1024 rounds were interrupted";
}

TEST_P(fiber_test, interrupt_before_blocking_is_pending) {
    std::error_code first, second;
    bool pending_seen = false;
    auto f = spawn([&] {
        this_fiber::yield();
        pending_seen = this_fiber::interrupt_pending();
        first = this_fiber::sleep_for(10s).error();
        second = this_fiber::sleep_for(1ms).error();
    });
    ASSERT_TRUE(f->interrupt());  // not started yet: stays pending
    ASSERT_TRUE(f->join());
    EXPECT_TRUE(pending_seen);
    EXPECT_EQ(first, std::errc::operation_canceled);
    EXPECT_FALSE(second);  // consumed by the first call
}

TEST_P(fiber_test, join_for_times_out_and_stays_joinable) {
    auto f = spawn([] { (void)this_fiber::sleep_for(50ms); });
    EXPECT_EQ(f->join_for(1ms).error(), std::errc::timed_out);
    EXPECT_TRUE(f->joinable());
    EXPECT_TRUE(f->join());
}

TEST_P(fiber_test, an_interrupted_join_is_ecanceled_and_the_fiber_stays_joinable) {
    event release;
    auto target = spawn([&] { (void)release.wait(); });
    std::error_code got;
    auto joiner = spawn([&] {
        auto r = target->join();
        if (!r) got = r.error();
    });
    this_fiber::yield();  // both wait now: the target for the event, the joiner in join
    ASSERT_TRUE(joiner->interrupt());
    ASSERT_TRUE(joiner->join());
    EXPECT_EQ(got, std::errc::operation_canceled);
    EXPECT_TRUE(target->joinable());
    release.set();
    EXPECT_TRUE(target->join());
}

TEST_P(fiber_test, a_join_interrupted_after_the_fiber_ended_on_another_vcpu_leaves_it_alone) {
    // A fiber of another vCPU ends, which posts the joiner's wake-up here, and a spawn there
    // reaps it (its stack, not of the default size, is unmapped rather than cached unless
    // something still holds it); this vCPU interrupts the joiner before its event loop has
    // taken the wake-up. The interrupt takes the fiber's join lock, which must still be there,
    // and the join succeeds: the fiber ended first.
    auto rt = runtime::start(test::test_runtime(1, GetParam()));
    ASSERT_TRUE(rt);
    std::atomic<bool> spawned{false}, go{false}, ending{false}, reaped{false};
    std::optional<fiber> target;
    ASSERT_TRUE((*rt)->post(0, [&] {
        target = spawn(fiber_options{.stack_size = 64 * 1024}, [&] {
                     while (!go.load(std::memory_order_acquire)) {
                     }
                     ending.store(true, std::memory_order_release);
                 }).value();
        spawned.store(true, std::memory_order_release);
    }));
    while (!spawned.load(std::memory_order_acquire)) this_fiber::yield();
    std::error_code got = std::make_error_code(std::errc::interrupted);
    auto joiner = spawn([&] {
        auto r = target->join_for(10s);
        got = r ? std::error_code{} : r.error();
    });
    ASSERT_TRUE(joiner);
    this_fiber::yield();  // the joiner parks in join_for
    ASSERT_TRUE((*rt)->post(0, [&] {
        while (!ending.load(std::memory_order_acquire)) this_fiber::yield();  // it has left
        ASSERT_TRUE(spawn([] {})->join());  // this spawn reaps it
        reaped.store(true, std::memory_order_release);
    }));
    go.store(true, std::memory_order_release);
    while (!reaped.load(std::memory_order_acquire)) {
    }  // no switch: this vCPU's event loop must not run the posted wake-up yet
    ASSERT_TRUE(joiner->interrupt());
    ASSERT_TRUE(joiner->join());
    EXPECT_FALSE(got);
    EXPECT_FALSE(target->joinable());
}

TEST_P(fiber_test, detached_fibers_run_to_completion) {
    int done = 0;
    for (int i = 0; i < 100; ++i) {
        auto f = spawn([&] { this_fiber::yield(); ++done; });
        ASSERT_TRUE(f->detach());
    }
    while (done < 100) this_fiber::yield();
    EXPECT_EQ(done, 100);
}

TEST_P(fiber_test, destroying_a_handle_detaches) {
    bool ran = false;
    { auto f = spawn([&] { ran = true; }); }
    this_fiber::yield();
    EXPECT_TRUE(ran);
}

TEST_P(fiber_test, names_and_ids) {
    fiber_options o;
    o.name = "worker";
    std::string name;
    uint64_t id = 0;
    auto f = spawn(o, [&] { name = this_fiber::name(); id = this_fiber::id(); });
    uint64_t fid = f->id();
    ASSERT_TRUE(f->join());
    EXPECT_EQ(name, "worker");
    EXPECT_EQ(id, fid);
    EXPECT_NE(id, this_fiber::id());
}

TEST_P(fiber_test, fiber_local_is_per_fiber_and_destroyed) {
    static int destroyed = 0;
    struct counted {
        int v = 0;
        ~counted() { ++destroyed; }
    };
    fiber_local<counted> fl;
    destroyed = 0;
    fl->v = 7;
    int seen_a = -1, seen_b = -1;
    auto a = spawn([&] { seen_a = fl->v; fl->v = 1; this_fiber::yield(); seen_a = fl->v; });
    auto b = spawn([&] { seen_b = fl->v; fl->v = 2; this_fiber::yield(); seen_b = fl->v; });
    ASSERT_TRUE(a->join() && b->join());
    EXPECT_EQ(seen_a, 1);
    EXPECT_EQ(seen_b, 2);
    EXPECT_EQ(fl->v, 7);
    EXPECT_EQ(destroyed, 2);
}

// A fiber-local's destructor that uses another fiber-local of the same fiber, of a key past the
// end of the fiber's slots (which grow, i.e. move, then): that value is destroyed too, and the
// ending fiber frees its slots once (they were freed twice, and read after being freed).
TEST_P(fiber_test, a_fiber_local_destructor_may_use_fiber_locals) {
    static int late_destroyed = 0;
    struct late {
        ~late() { ++late_destroyed; }
    };
    static std::vector<std::unique_ptr<fiber_local<late>>> later;
    struct user {
        ~user() { (void)later.back()->get(); }
    };
    fiber_local<user> first;
    for (int i = 0; i < 40; ++i) later.push_back(std::make_unique<fiber_local<late>>());
    late_destroyed = 0;
    auto f = spawn([&] { (void)first.get(); });  // the only key set: its slots are few
    ASSERT_TRUE(f->join());
    EXPECT_EQ(late_destroyed, 1);
    later.clear();
}

// A fiber-local's destructor that uses another fiber-local of the fiber whose value is not
// destroyed yet sees that value, as with pthread keys: one counter per fiber, holding what both
// put in it. The destructors ran on an array taken away first, so that one made a second
// counter and the flush went to it.
TEST_P(fiber_test, a_fiber_local_destructor_sees_the_fibers_values_not_destroyed_yet) {
    static std::vector<int> destroyed;  // each counter's total as it goes
    struct counter {
        int n = 0;
        ~counter() { destroyed.push_back(n); }
    };
    static fiber_local<counter>* counters = nullptr;
    struct buffer {
        int pending = 0;
        ~buffer() { (*counters)->n += pending; }
    };
    // Made in this order, so that the buffer's key comes first and it is destroyed first.
    fiber_local<buffer> buf;
    fiber_local<counter> cnt;
    counters = &cnt;
    destroyed.clear();
    auto f = spawn([&] {
        cnt->n = 10;
        buf->pending = 5;
    });
    ASSERT_TRUE(f->join());
    EXPECT_EQ(destroyed, std::vector<int>{15});
    counters = nullptr;
}

// A fiber-local's constructor that uses a fiber-local of a key past the end of the fiber's slots
// (which grow, i.e. move, then): the value made lands in the slot later uses read. It was
// stored through a reference into the old array, so it was lost (and leaked) and the next use
// made another one.
TEST_P(fiber_test, a_fiber_local_constructor_may_use_fiber_locals) {
    struct late {
        int v = 0;
    };
    static std::vector<std::unique_ptr<fiber_local<late>>> later;
    static int made = 0;
    struct user {
        int v = 0;
        user() {
            ++made;
            later.back()->get().v = 1;
        }
    };
    fiber_local<user> first;
    for (int i = 0; i < 40; ++i) later.push_back(std::make_unique<fiber_local<late>>());
    made = 0;
    int seen = -1, late_v = -1;
    auto f = spawn([&] {
        first->v = 5;  // the only key used so far: its slots are few
        seen = first->v;
        late_v = later.back()->get().v;
    });
    ASSERT_TRUE(f->join());
    EXPECT_EQ(seen, 5);
    EXPECT_EQ(made, 1);
    EXPECT_EQ(late_v, 1);
    later.clear();
}

// A dropped fiber_local's key goes to the next fiber_local of its type: a fiber that makes and
// drops one in a loop keeps one value alive (its value of the dropped one is destroyed when it
// first uses the new one; they used to pile up until the fiber ended, one key each), and never
// sees the dropped one's value through the new one.
TEST_P(fiber_test, a_dropped_fiber_locals_key_is_reused_without_its_values) {
    static int live = 0;
    struct counted {
        int v = 0;
        counted() { ++live; }
        ~counted() { --live; }
    };
    live = 0;
    int most_live = 0, stale_seen = 0;
    auto f = spawn([&] {
        for (int i = 1; i <= 1000; ++i) {
            fiber_local<counted> fl;
            if (fl->v != 0) ++stale_seen;
            fl->v = i;
            most_live = std::max(most_live, live);
        }
    });
    ASSERT_TRUE(f->join());
    EXPECT_EQ(stale_seen, 0);
    EXPECT_EQ(most_live, 1);
    EXPECT_EQ(live, 0);

    // A fiber's value of a dropped fiber_local stays until the fiber uses the key's next
    // fiber_local, which does not see it; it is destroyed then.
    auto dropped = std::make_unique<fiber_local<counted>>();
    std::unique_ptr<fiber_local<counted>> next;
    int step = 0, kept = -1, seen = -1, after = -1;
    auto g = spawn([&] {
        (*dropped)->v = 5;
        step = 1;
        while (step != 2) this_fiber::yield();
        kept = live;
        seen = (*next)->v;
        after = live;
    });
    ASSERT_TRUE(g);
    while (step != 1) this_fiber::yield();
    dropped.reset();
    next = std::make_unique<fiber_local<counted>>();
    step = 2;
    ASSERT_TRUE(g->join());
    EXPECT_EQ(kept, 1);
    EXPECT_EQ(seen, 0);
    EXPECT_EQ(after, 1);
    EXPECT_EQ(live, 0);
}

// The destructor of a fiber's stale value (run when the fiber first uses the key that reused
// its slot) may use fiber-locals of a key past the end of the fiber's slots, which grow, i.e.
// move, then: the value set through the new key lands in the slot that later uses read.
TEST_P(fiber_test, a_stale_fiber_local_value_may_use_fiber_locals_as_it_goes) {
    struct late {
        int v = 0;
    };
    static std::vector<std::unique_ptr<fiber_local<late>>> later;
    struct user {
        int v = 0;
        ~user() { later.back()->get().v = 1; }
    };
    int again = -1, late_v = -1;
    auto f = spawn([&] {
        auto first = std::make_unique<fiber_local<user>>();
        (void)first->get();  // the fiber's slots are sized for this key
        first.reset();
        // Enough new keys that the last is past the end of the fiber's slots, however many
        // keys other tests have made.
        for (int i = 0; i < 4096; ++i) later.push_back(std::make_unique<fiber_local<late>>());
        fiber_local<user> second;  // first's key
        second->v = 9;             // destroys first's value, which uses later.back()
        again = second->v;
        late_v = later.back()->get().v;
    });
    ASSERT_TRUE(f->join());
    EXPECT_EQ(again, 9);
    EXPECT_EQ(late_v, 1);
    later.clear();
}

// A spawn reuses the record (and stack) of the fiber that ended last: nothing of that fiber's
// state may leak into the next one.
TEST_P(fiber_test, a_reused_fiber_record_starts_clean) {
    fiber_local<int> fl;
    fiber_options o;
    o.name = "first";
    auto a = spawn(o, [&] {
        *fl = 5;
        this_fiber::yield();  // interrupted meanwhile, and ends without a blocking call
    });
    this_fiber::yield();
    ASSERT_TRUE(a->interrupt());
    const uint64_t a_id = a->id();
    ASSERT_TRUE(a->join());
    bool pending = true;
    std::string name = "?";
    int local = -1;
    uint64_t id = 0;
    std::error_code slept;
    auto b = spawn([&] {
        pending = this_fiber::interrupt_pending();
        name = this_fiber::name();
        local = *fl;
        id = this_fiber::id();
        slept = this_fiber::sleep_for(1ms).error();
    });
    ASSERT_TRUE(b->join());
    EXPECT_FALSE(pending);
    EXPECT_EQ(name, "");
    EXPECT_EQ(local, 0);
    EXPECT_NE(id, a_id);
    EXPECT_FALSE(slept);
}

TEST_P(fiber_test, custom_stack_size_and_deep_recursion) {
    fiber_options o;
    o.stack_size = 1 << 20;
    int depth = 0;
    auto f = spawn(o, [&] {
        auto rec = [](auto& self, int n) -> int {
            volatile char pad[512];
            pad[0] = static_cast<char>(n);
            return n == 0 ? pad[0] : 1 + self(self, n - 1);
        };
        depth = rec(rec, 1000);  // ~600 KiB of frames
    });
    ASSERT_TRUE(f->join());
    EXPECT_EQ(depth, 1000);
}

TEST_P(fiber_test, fini_interrupts_remaining_fibers) {
    std::error_code got;
    auto f = spawn([&] { got = this_fiber::sleep_for(1h).error(); });
    ASSERT_TRUE(f->detach());
    this_fiber::yield();
    ASSERT_TRUE(fini());
    EXPECT_EQ(got, std::errc::operation_canceled);
}

// A call posted to the vCPU runs in fini()'s last look at its inbox, after every fiber has
// ended: a fiber it starts runs all the same (interrupted), before fini returns.
TEST_P(fiber_test, fini_runs_fibers_started_by_work_posted_to_it) {
    struct post : vcpu_call {
        std::error_code got;
        bool ran = false;
    } p;
    p.fn = [](vcpu_call* c) noexcept {
        auto* self = static_cast<post*>(c);
        auto f = spawn([self] {
            self->ran = true;
            self->got = this_fiber::sleep_for(1h).error();
        });
        if (f) (void)f->detach();
    };
    ASSERT_TRUE(post_call(vcpu_handle::current(), p));
    ASSERT_TRUE(fini());
    EXPECT_TRUE(p.ran);
    EXPECT_EQ(p.got, std::errc::operation_canceled);
}

// A call that posts itself again and starts a fiber whenever it runs kept fini going round for
// ever (each round ran it, and its fiber made another round). fini ends all the same: the vCPU
// stops making fibers (ESHUTDOWN), and the call, which keeps posting itself, is left unrun.
TEST_P(fiber_test, fini_ends_when_posted_work_keeps_starting_more) {
    struct post : vcpu_call {
        int runs = 0;
        int fibers_ran = 0;
        int fibers_made = 0;
        std::error_code refused;
    } p;
    p.fn = [](vcpu_call* c) noexcept {
        auto* self = static_cast<post*>(c);
        ++self->runs;
        auto f = spawn([self] { ++self->fibers_ran; });
        if (f) {
            ++self->fibers_made;
            (void)f->detach();
        } else if (!self->refused) {
            self->refused = f.error();
        }
        (void)post_call(vcpu_handle::current(), *self);
    };
    ASSERT_TRUE(post_call(vcpu_handle::current(), p));
    ASSERT_TRUE(fini());
    EXPECT_EQ(p.refused, errno_code(ESHUTDOWN));
    EXPECT_GT(p.fibers_made, 0);
    EXPECT_EQ(p.fibers_ran, p.fibers_made);  // every fiber it made ran before fini returned
    EXPECT_GT(p.runs, p.fibers_made);
}

TEST(fiber_misuse, spawn_outside_vcpu_is_eperm) {
    ::setenv("GLUON_MISUSE_ABORT", "0", 1);
    auto f = spawn([] {});
    EXPECT_EQ(f.error(), std::errc::operation_not_permitted);
    ::unsetenv("GLUON_MISUSE_ABORT");
}

TEST(fiber_misuse, init_twice_is_eexist) {
    ASSERT_TRUE(init({.log_engine = false}));
    EXPECT_EQ(init({.log_engine = false}).error(), std::errc::file_exists);
    ASSERT_TRUE(fini());
}

}  // namespace
}  // namespace gluon
