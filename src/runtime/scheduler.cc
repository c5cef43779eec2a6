#include "scheduler.h"

#include "gluon/common/log.h"
#include "gluon/runtime/fiber.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace gluon::detail {

void fiber_queued_unparked(const fiber_impl* f) noexcept {
    static constexpr const char* states[] = {"ready", "running", "waiting", "done"};
    GLUON_ERROR("gluon: internal error: fiber {} ({}) resumed while {}, not parked: it would be in its "
                "vCPU's run queue twice and the fibers behind it lost",
                f->id, f->name[0] ? f->name : "unnamed", states[static_cast<unsigned>(f->state)]);
    std::abort();
}

thread_local constinit vcpu_hot* t_hot = nullptr;

namespace {

void drain_remote(vcpu* v) noexcept {
    remote_node* n = v->remote.take_all();
    if (n) v->last_remote_ns = v->last_poll_ns;  // approximate "now": good enough for the spin
    while (n) {
        remote_node* next = n->next;
        n->run(v, n);
        n = next;
    }
}

// A fiber resumed by other means (an interrupt) keeps its timer until it runs again: if the
// deadline passes in between, the wait is already over and its cancel hook must not run twice.
void on_park_timeout(timer_node* t) noexcept {
    auto* f = reinterpret_cast<fiber_impl*>(reinterpret_cast<char*>(t) - offsetof(fiber_impl, timer));
    if (f->state == fiber_state::waiting && f->cancel) f->cancel(f, ETIMEDOUT);
}

void make_ready(fiber_impl* f) noexcept {
    check_parked(f);
    f->state = fiber_state::ready;
    f->owner->runq.push_back(*f);
}

}  // namespace

// Before a vCPU goes to sleep it spins for a short while (idle_spin_ns), watching its inbox and
// its engine: a wake-up from another core then costs a cache-line transfer instead of a kernel
// wake-up, which on virtual machines takes tens of microseconds. Returns true if work arrived.
constexpr int64_t k_spin_window_ns = 10'000'000;

// How often an engine without an exact hint (epoll) is polled while its vCPU spins.
constexpr int64_t k_spin_poll_ns = 4000;

/// Polls an engine without an exact hint without blocking, at most every k_spin_poll_ns (it
/// costs a system call each time).
void poll_inexact_engine(vcpu* v, int64_t now) noexcept {
    if (now - v->last_poll_ns < k_spin_poll_ns) return;
    v->eng->wait(0);
    v->last_poll_ns = now;
}

bool spin_for_work(vcpu* v, int64_t budget) noexcept {
    const bool exact = v->eng->pending_hint_is_exact();
    const int64_t start = mono_now_ns();
    for (unsigned i = 1;; ++i) {
        if (!v->remote.empty() || (exact && v->eng->has_pending())) return true;
        if ((i & 31) == 0) {
            const int64_t now = mono_now_ns();
            if (now - start >= budget) return false;
            if (!exact) {  // no cheap hint: look with a non-blocking wait now and then
                poll_inexact_engine(v, now);
                if (!v->runq.empty()) return true;
            }
        }
        __builtin_ia32_pause();
    }
}

void reap_zombies(vcpu* v) noexcept {
    while (v->zombies) {
        fiber_impl* z = pop_zombie(v);
        if (z->orphan)
            fiber_free(z);
        else
            fiber_release(z);
    }
}

namespace {
// The run queue's length for monitoring, sampled every 20 ms where the event loop has just
// filled it. A walk capped at 1024 fibers: counting every push and pop would tax the switch
// path, and walking on every pass cost 20% of fiber creation with 100,000 fibers ready.
void note_runq(vcpu* v) noexcept {
    vcpu_counters& c = v->counters;
    if (v->last_poll_ns < c.next_runq_sample_ns) return;
    c.next_runq_sample_ns = v->last_poll_ns + 20'000'000;
    uint64_t n = 0;
    for (fiber_hot* f = v->runq.front(); f && n < 1024; f = f->run_next) ++n;
    c.runq.set(n);
}
}  // namespace

void poll(vcpu* v, bool may_block) noexcept {
    if (v->zombies) reap_zombies(v);
    drain_remote(v);
    int64_t now = 0;  // read once, when there are timers (the only ones to compare it with)
    if (!v->timers.empty()) v->timers.fire_expired(now = mono_now_ns());
    int64_t timeout = 0;
    bool slept = false;
    if (may_block && v->runq.empty()) {
        timeout = -1;
        if (!v->timers.empty()) {  // (then they were before firing: `now` was read)
            // Timer callbacks are short: a deadline from `now` is late by their run at most.
            int64_t left = v->timers.next_deadline() - now;
            timeout = left > 0 ? left : 0;
        }
        // Spin only while other threads have been waking us lately: a vCPU fed by the kernel
        // alone (a network server) would burn CPU spinning for nothing.
        if (timeout != 0 && v->idle_spin_ns > 0 &&
            v->last_poll_ns - v->last_remote_ns < k_spin_window_ns) {
            // Submit what is queued (no system call on io_uring if nothing is pending).
            if (v->eng->pending_hint_is_exact())
                v->eng->wait(0);
            else
                poll_inexact_engine(v, mono_now_ns());
            drain_remote(v);
            if (v->runq.empty()) {
                int64_t budget = timeout < 0 ? v->idle_spin_ns : std::min(timeout, v->idle_spin_ns);
                if (spin_for_work(v, budget)) {
                    drain_remote(v);
                    // Woken by another vCPU: run the fiber now. The engine was polled before
                    // the spin (and every few us during it, if it has no exact hint); busy
                    // fibers poll it again through maybe_poll once last_poll_ns is old.
                    if (!v->runq.empty()) return;
                    timeout = 0;
                }
                if (timeout > 0) timeout = std::max<int64_t>(0, v->timers.next_deadline() - mono_now_ns());
            }
            if (!v->runq.empty()) timeout = 0;
        }
        if (timeout != 0) {
            // Dekker handshake with post_remote(): publish "sleeping", then look once more.
            v->sleeping.store(true, std::memory_order_seq_cst);
            slept = true;
            if (!v->remote.empty()) timeout = 0;
        }
    }
    v->eng->wait(timeout);
    v->last_poll_ns = mono_now_ns();
    note_runq(v);
    if (slept) {
        v->sleeping.store(false, std::memory_order_relaxed);
        drain_remote(v);
        if (!v->timers.empty()) v->timers.fire_expired(v->last_poll_ns);
    }
}

void post_remote(vcpu* target, remote_node* n) noexcept {
    // Counted so that fini() cannot free the engine while we are about to notify it: the
    // target may run the node and finish its last fiber before this function returns.
    target->posters.fetch_add(1, std::memory_order_acq_rel);
    target->remote.push(n);
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (target->sleeping.load(std::memory_order_relaxed) &&
        target->sleeping.exchange(false, std::memory_order_acq_rel))
        target->eng->notify();
    target->posters.fetch_sub(1, std::memory_order_release);
}

void resume_remote(fiber_impl* f) noexcept {
    f->resume_node.run = [](vcpu*, remote_node* n) {
        make_ready(reinterpret_cast<fiber_impl*>(reinterpret_cast<char*>(n) -
                                                 offsetof(fiber_impl, resume_node)));
    };
    post_remote(f->owner, &f->resume_node);
}

void arm_park_timer(vcpu* v, fiber_impl* f, deadline_t deadline) noexcept {
    f->timer.deadline = deadline;
    f->timer.fire = on_park_timeout;
    v->timers.insert(&f->timer);
}

void deliver_interrupt(fiber_impl* f) noexcept {
    if (f->state == fiber_state::waiting && f->cancel &&
        f->interrupt_pending.load(std::memory_order_relaxed))
        f->cancel(f, ECANCELED);
}

namespace {
constexpr size_t k_idle_stack = 64 * 1024;

void idle_main(void* arg) noexcept {
    auto* self = static_cast<fiber_impl*>(arg);
    vcpu* v = self->owner;
    on_first_entry(self);
    for (;;) {
        if (fiber_impl* f = v->migrating) {  // we are off its stack now: hand it over
            v->migrating = nullptr;
            post_remote(f->owner, &f->migrate_node);
        }
        switch_to(v, self, next_ready(v));
    }
}
}  // namespace

result<void> make_idle_fiber(vcpu* v) noexcept {
    auto st = GLUON_TRY(stack_alloc(k_idle_stack));
    auto* f = new (record_of(st)) fiber_impl;
    f->stack = st;
    f->owner = v;
    f->is_main = true;  // not a user fiber: never migrates, never counted
    strncpy(f->name, "idle", sizeof f->name - 1);
#ifdef GLUON_ASAN
    f->asan_bottom = st.lo + k_guard_size;
    f->asan_size = static_cast<size_t>(reinterpret_cast<char*>(f) - (st.lo + k_guard_size));
#endif
#ifdef GLUON_TSAN
    f->tsan_fiber = __tsan_create_fiber(0);
#endif
    make_context(&f->ctx, f, idle_main, f);
    v->idle = f;
    return {};
}

void destroy_idle_fiber(vcpu* v) noexcept {
    fiber_impl* f = v->idle;
    if (!f) return;
#ifdef GLUON_TSAN
    __tsan_destroy_fiber(f->tsan_fiber);
#endif
    stack_mem s = f->stack;
    f->~fiber_impl();
    stack_free(s);
    v->idle = nullptr;
}

}  // namespace gluon::detail
