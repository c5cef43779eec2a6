// The per-vCPU scheduler: fiber and vCPU records and the switch path. Private to the runtime.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>

#include "context.h"
#include "gluon/common/intrusive_list.h"
#include "gluon/common/relaxed_counter.h"
#include "gluon/common/spinlock.h"
#include "gluon/engine/engine.h"
#include "gluon/runtime/waiter.h"
#include "remote_queue.h"
#include "sanitizer.h"
#include "stack.h"
#include "timer_heap.h"

namespace gluon::detail {

struct vcpu;
struct fls_entry;

struct fiber_impl : fiber_hot {
    vcpu* owner = nullptr;
    list_hook all_hook;
    bool is_main = false;

    // Parking (with fiber_hot's wait_result, cancel and interrupt_pending).
    timer_node timer;
    std::atomic<bool> interrupt_queued{false};
    remote_node resume_node;
    remote_node interrupt_node;
    remote_node migrate_node;

    // Lifecycle, guarded by join_lock (biased to the owner vCPU from birth, so a fiber created,
    // joined and ended on one vCPU costs no atomic): one reference for running, one for the
    // handle, one per interrupt in flight.
    int refs = 2;
    prim_lock join_lock;
    bool finished = false;
    bool orphan = false;  // set at exit when only the running reference was left
    waiter_list joiners;
    void (*invoke)(void*) = nullptr;
    void* storage = nullptr;
    stack_mem stack;

    uint64_t id = 0;
    char name[32] = {};
    fls_entry* fls = nullptr;
    size_t fls_size = 0;

#ifdef GLUON_ASAN
    const void* asan_bottom = nullptr;
    size_t asan_size = 0;
    void* asan_fake_stack = nullptr;
#endif
#ifdef GLUON_TSAN
    void* tsan_fiber = nullptr;
#endif
};

// fiber_free leaves the record in its stack for the next fiber (fiber.cc, recycle_record).
static_assert(std::is_trivially_destructible_v<fiber_impl>);

using fiber_list = intrusive_list<fiber_impl, &fiber_impl::all_hook>;

/// Monitoring counters (runtime/stats.h): written by the vCPU only, read by any thread.
struct vcpu_counters {
    relaxed_counter fibers_created, fibers_live;
    relaxed_counter ops, op_errors, bytes_in, bytes_out;  // engine operations (fd.cc, run_on)
    relaxed_counter runq;      // ready fibers when the event loop last looked (sampled, capped)
    int64_t started_ns = 0;
    // Busy time is the vCPU thread's CPU time since init (read by vcpu_statistics from its
    // CPU-time clock), not timed around each wait: that cost two clock reads per blocking
    // poll, 40 ns on a fiber's every parked I/O.
    clockid_t cpu_clock = 0;
    bool has_cpu_clock = false;
    int64_t cpu_base_ns = 0;
    int64_t next_runq_sample_ns = 0;
};

struct vcpu : vcpu_hot {
    fiber_impl main;
    // Runs the event loop when the current fiber cannot host it on its own stack (it is
    // being handed to another vCPU). Created by init.
    fiber_impl* idle = nullptr;
    remote_queue remote;
    std::atomic<bool> sleeping{false};
    // Threads inside post_remote() on this vCPU; fini waits for zero before freeing the engine.
    std::atomic<int> posters{0};
    timer_heap timers;
    std::unique_ptr<engine::engine> eng;
    stack_cache stacks;
    fiber_list all;
    size_t nfibers = 0;  // excluding main
    int64_t last_poll_ns = 0;
    int64_t idle_spin_ns = 0;
    int64_t last_remote_ns = INT64_MIN / 2;  // when other threads last posted to us
    const biased_sections* biased = nullptr;  // the vCPU thread's t_biased
    // Fibers that ended; their stacks are released by reap_zombies(), never on their own stack.
    fiber_impl* zombies = nullptr;
    // A fiber that switched to the idle fiber to be handed to another vCPU (see migrate_to).
    fiber_impl* migrating = nullptr;
    bool fini_waiting = false;
    bool closing = false;  // fini's last rounds: no fiber is made here any more (ESHUTDOWN)
    int index = -1;
    pid_t tid = 0;
    vcpu* next_registered = nullptr;
    uint64_t next_fiber_id = 0;
    vcpu_counters counters;
    void* altstack = nullptr;
#ifdef GLUON_ASAN
    fiber_impl* asan_from = nullptr;  // who switched last, to learn the main stack's bounds
#endif

    explicit vcpu(size_t stack_cache_size) : stacks(stack_cache_size) {}
};

/// The record at the top of a fiber stack: [fiber_impl][callable], the stack proper below.
inline fiber_impl* record_of(const stack_mem& s) noexcept {
    return reinterpret_cast<fiber_impl*>(s.top() - ((sizeof(fiber_impl) + 63) & ~size_t{63}));
}
inline fiber_impl* impl(fiber_hot* f) noexcept { return static_cast<fiber_impl*>(f); }
inline vcpu* cur_vcpu() noexcept { return static_cast<vcpu*>(t_hot); }
/// The running fiber of v.
inline fiber_impl* running(vcpu* v) noexcept { return impl(v->current); }

/// Polls the engine, remote queue and timers. Blocks if may_block and nothing is ready.
void poll(vcpu* v, bool may_block) noexcept;

/// Destroys a fiber record whose last reference is gone and releases its stack.
void fiber_free(fiber_impl* f) noexcept;

/// Takes the most recently ended fiber off v's zombie list (the caller frees or reuses it).
inline fiber_impl* pop_zombie(vcpu* v) noexcept {
    fiber_impl* z = v->zombies;
    v->zombies = impl(z->run_next);
#ifdef GLUON_TSAN
    __tsan_destroy_fiber(z->tsan_fiber);
#endif
    return z;
}

/// Releases the stacks of ended fibers. Must not run on a zombie's stack: fiber_exit switches
/// to another fiber (or the idle fiber) before anything can call this.
void reap_zombies(vcpu* v) noexcept;

inline void sanitizer_before_switch([[maybe_unused]] fiber_impl* from,
                                    [[maybe_unused]] fiber_impl* to) noexcept {
#ifdef GLUON_ASAN
    __sanitizer_start_switch_fiber(from->state == fiber_state::done ? nullptr : &from->asan_fake_stack,
                                   to->asan_bottom, to->asan_size);
#endif
#ifdef GLUON_TSAN
    __tsan_switch_to_fiber(to->tsan_fiber, 0);
#endif
}

/// Called by the fiber that has just been switched back in (`self`); `from` is who left.
inline void sanitizer_after_switch([[maybe_unused]] fiber_impl* self,
                                   [[maybe_unused]] fiber_impl* from) noexcept {
#ifdef GLUON_ASAN
    const void* bottom = nullptr;
    size_t size = 0;
    __sanitizer_finish_switch_fiber(self->asan_fake_stack, &bottom, &size);
    if (from && from->is_main && !from->asan_bottom) {
        from->asan_bottom = bottom;
        from->asan_size = size;
    }
#endif
}

/// Switches from the running fiber `from` to `to` on vCPU v. Returns when `from` runs again,
/// possibly on another vCPU (after migration): read from->owner, not v, afterwards. Nothing is
/// done after the switch lands (every register is reloaded from the stack there, so any work
/// would be a chain of dependent loads on the hottest path): work that must follow a switch
/// (freeing a dead fiber's stack, handing a fiber to another vCPU) is done by others later.
inline void switch_to(vcpu* v, fiber_impl* from, fiber_impl* to) noexcept {
    v->current = to;
    to->state = fiber_state::running;
    sanitizer_before_switch(from, to);
#ifdef GLUON_ASAN
    v->asan_from = from;
#endif
    switch_context(&from->ctx, &to->ctx);
#ifdef GLUON_ASAN
    sanitizer_after_switch(from, from->owner->asan_from);
#endif
}

/// Busy fibers must not starve I/O: every k_poll_check_mask+1 picks, if the engine has not
/// been polled for k_poll_interval_ns, poll it without blocking. (Polling on every such pick
/// regardless cost a syscall per 64 switches, a third of the switch time.)
inline constexpr int64_t k_poll_interval_ns = 50'000;
inline void maybe_poll(vcpu* v) noexcept {
    if ((++v->tick & k_poll_check_mask) == 0 &&
        mono_now_ns() - v->last_poll_ns > k_poll_interval_ns)
        poll(v, false);
}

/// First thing a new context (fiber or idle) does: finish the switch that started it.
inline void on_first_entry([[maybe_unused]] fiber_impl* self) noexcept {
#ifdef GLUON_ASAN
    sanitizer_after_switch(self, self->owner->asan_from);
#endif
}

/// Where a fiber that must not run the event loop on its own stack goes: the next ready fiber,
/// or the idle fiber.
inline fiber_impl* next_or_idle(vcpu* v) noexcept {
    fiber_impl* next = impl(v->runq.pop_front());
    return next ? next : v->idle;
}

/// The next fiber to run; runs the event loop inline (on the caller's stack) while none is ready.
inline fiber_impl* next_ready(vcpu* v) noexcept {
    maybe_poll(v);
    while (v->runq.empty()) poll(v, true);
    return impl(v->runq.pop_front());
}

/// The current fiber gives up the CPU; the caller has set its state (and queued it if ready).
inline void reschedule(vcpu* v) noexcept {
    fiber_impl* cur = running(v);
    fiber_impl* next = next_ready(v);
    if (next != cur)
        switch_to(v, cur, next);
    else
        cur->state = fiber_state::running;
}

/// Creates v->idle (a fiber with a small stack that loops on next_ready).
result<void> make_idle_fiber(vcpu* v) noexcept;
void destroy_idle_fiber(vcpu* v) noexcept;

void resume_remote(fiber_impl* f) noexcept;

/// Debug builds: f, about to be queued on its own vCPU, must be parked. (Queued twice, it would
/// be linked into the run queue twice and the fibers behind it lost.) Another thread may wake a
/// fiber that has not finished parking yet: its vCPU checks when it takes the wake-up.
[[noreturn]] void fiber_queued_unparked(const fiber_impl* f) noexcept;
inline void check_parked([[maybe_unused]] const fiber_impl* f) noexcept {
#ifndef NDEBUG
    if (f->state != fiber_state::waiting) [[unlikely]]
        fiber_queued_unparked(f);
#endif
}

/// Makes f ready to run (any thread). The fiber must be parked and not already being resumed.
inline void resume(fiber_impl* f, long result) noexcept {
    f->wait_result = result;
    vcpu* v = f->owner;
    if (v == cur_vcpu()) {
        check_parked(f);
        f->state = fiber_state::ready;
        v->runq.push_back(*f);
        return;
    }
    resume_remote(f);
}

/// wake_inline's futex path, for a waiter that is a plain OS thread.
void wake_thread(waiter& w) noexcept;
/// wake() that does not wait for a timeout or interrupt of w under way on its vCPU or thread,
/// for a waker holding w's lock (fiber exit, wake_holding_lock): the primitive must outlive
/// that cancel by other means (see fiber_exit).
inline void wake_inline(waiter& w, long result) noexcept {
    w.result = result;
    if (w.fiber)
        resume(impl(w.fiber), result);
    else if (w.resume)
        w.resume(w.resume_ctx, result);
    else
        wake_thread(w);
}

void arm_park_timer(vcpu* v, fiber_impl* f, deadline_t deadline) noexcept;

/// Parks the current fiber until resume(); `cancel` is invoked (on this vCPU) on deadline or
/// interrupt and must make the fiber resume. Returns the resume result. Inline: it is on the
/// path of every blocking call, and inlined its switch saves registers only once.
inline long park_current(vcpu* v, deadline_t deadline, void (*cancel)(fiber_impl*, int),
                         void* ctx) noexcept {
    fiber_impl* f = running(v);
    f->cancel = cancel;
    f->cancel_ctx = ctx;
    f->state = fiber_state::waiting;
    if (deadline != k_no_deadline) arm_park_timer(v, f, deadline);
    reschedule(v);
    v = f->owner;
    if (f->timer.armed()) v->timers.remove(&f->timer);
    return finish_park(f);
}

/// Pushes work to another vCPU and wakes it if it sleeps.
void post_remote(vcpu* target, remote_node* n) noexcept;
/// post_remote to v if v is a vCPU still registered (one that fini has not unregistered); false
/// if it is not. fini decides to end under the same lock, so work posted this way runs (see
/// fini and run_timer_removals).
bool post_remote_if_alive(vcpu* v, remote_node* n) noexcept;

/// Takes t off the heap of vCPU v, which may be another thread's, and waits until it is done:
/// a no-op if v has ended (its heap went with it) or t is not in v's heap.
void remove_timer_on(vcpu* v, timer_node* t) noexcept;
/// For fini after its last round: runs the removals of remove_timer_on still queued to v (their
/// callers wait for them), dropping whatever else is queued.
void run_timer_removals(vcpu* v) noexcept;

void deliver_interrupt(fiber_impl* f) noexcept;

/// Waits until the vCPU whose t_vcpu_tag is `tag` (if it still exists) is outside lk's biased
/// section.
void wait_biased_sections_of(uint32_t tag, const void* lk) noexcept;
/// True if membarrier(2) lets prim_locks be biased (checked once per process).
bool biasing_available() noexcept;

/// A fiber left this vCPU (ended or migrated): wake fini() when it was the last.
inline void fiber_left(vcpu* v) noexcept {
    v->counters.fibers_live.add(static_cast<uint64_t>(-1));
    if (--v->nfibers == 0 && v->fini_waiting) {
        v->fini_waiting = false;
        resume(&v->main, 0);
    }
}

}  // namespace gluon::detail
