// The parking primitive that every sync primitive is built from. A waiter lives on the stack of
// the fiber (or plain OS thread) that waits; the primitive links it into its own intrusive list
// under its own prim_lock. Waking, timing out and interrupting race safely: whoever unlinks the
// waiter (under the lock) owns the wake-up.
#pragma once

#include <atomic>
#include <cstdint>

#include "gluon/common/clock.h"
#include "gluon/common/intrusive_list.h"
#include "gluon/runtime/detail/hot.h"
#include "gluon/runtime/prim_lock.h"

namespace gluon {

struct waiter {
    list_hook hook;
    detail::fiber_hot* fiber;  // the waiting fiber; nullptr: an OS thread, woken through `word`
    std::atomic<uint32_t> word{0};
    long result = 0;
    void* data = nullptr;  // for the primitive (a channel's value slot, a reader flag, ...)

    /// Prepares a waiter for the calling fiber or thread.
    waiter() noexcept : fiber(detail::t_hot ? detail::t_hot->current : nullptr) {}
};

using waiter_list = intrusive_list<waiter, &waiter::hook>;

/// Called with the primitive's lock held after a cancelled waiter was unlinked (for primitives
/// whose state depends on the waiters, e.g. a shared_mutex with a writer queued).
using after_cancel_fn = void (*)(void* primitive);

struct park_options {
    deadline_t deadline = k_no_deadline;
    /// If false, an interrupt does not end this wait (it stays pending for the next call).
    bool interruptible = true;
    after_cancel_fn after_cancel = nullptr;
    void* primitive = nullptr;
};

namespace detail {
struct park_ctx {
    prim_lock* lk;
    waiter* w;
    const park_options* opts;
};
/// fiber_hot::cancel of a parked waiter: unlinks it (if a wake-up is not already on its way).
void cancel_parked(fiber_impl* f, int err) noexcept;
long park_slow(prim_lock& lk, waiter& w, const park_options& opts) noexcept;
}  // namespace detail

/// Parks the caller until wake(w, r) or the deadline (-ETIMEDOUT) or an interrupt
/// (-ECANCELED). `lk` must be held and `w` linked on entry; lk is released before parking and is
/// not held on return. Returns r, or the error.
///
/// Inline for the common case (a fiber, no deadline, another fiber ready): the switch then
/// happens in the caller's frame, and the fiber that resumes returns up its own call chain
/// instead of one the CPU's return predictor does not expect (see detail/hot.h).
inline long park(prim_lock& lk, waiter& w, const park_options& opts = {}) noexcept {
#if GLUON_INLINE_YIELD
    detail::vcpu_hot* v = detail::t_hot;
    if (w.fiber && opts.deadline == k_no_deadline) {
        detail::fiber_hot* f = v->current;
        if (!f->interrupt_pending.load(std::memory_order_relaxed) && detail::can_switch_inline(v)) {
            detail::park_ctx ctx{&lk, &w, &opts};
            f->cancel = detail::cancel_parked;
            f->cancel_ctx = &ctx;
            f->state = detail::fiber_state::waiting;
            lk.unlock();
            detail::switch_to_next(v, f);
            return detail::finish_park(f);
        }
    }
#endif
    return detail::park_slow(lk, w, opts);
}

/// Wakes a waiter that the caller has unlinked (under the primitive's lock); any thread.
void wake(waiter& w, long result) noexcept;

/// For a wait that ended with -ECANCELED although the operation had completed (its result
/// wins, see gluon/runtime/fiber.h): puts the consumed interrupt back for the next blocking call.
inline void restore_interrupt() noexcept {
    if (detail::t_hot)
        detail::t_hot->current->interrupt_pending.store(true, std::memory_order_relaxed);
}

/// Returns -ECANCELED and consumes the calling fiber's pending interrupt, if any; else 0.
/// Blocking calls check this first.
long take_interrupt() noexcept;

}  // namespace gluon
