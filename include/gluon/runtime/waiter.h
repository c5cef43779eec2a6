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

/// Parks the caller until wake(w, r) or the deadline (-ETIMEDOUT) or an interrupt
/// (-ECANCELED). `lk` must be held and `w` linked on entry; lk is released before parking and is
/// not held on return. Returns r, or the error.
long park(prim_lock& lk, waiter& w, const park_options& opts = {}) noexcept;

/// Wakes a waiter that the caller has unlinked (under the primitive's lock); any thread.
void wake(waiter& w, long result) noexcept;

/// Returns -ECANCELED and consumes the calling fiber's pending interrupt, if any; else 0.
/// Blocking calls check this first.
long take_interrupt() noexcept;

}  // namespace gluon
