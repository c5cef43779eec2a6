// The parking primitive that every sync primitive is built from. A waiter lives on the stack of
// the fiber (or plain OS thread) that waits; the primitive links it into its own intrusive list
// under its own prim_lock. Waking, timing out and interrupting race safely: whoever unlinks the
// waiter (under the lock) owns the wake-up.
//
// A primitive may be destroyed once the call that woke its last waiter returns (an event or a
// channel in the waker's frame, once the waiter is known to be woken). A parked fiber keeps its
// timer and interrupt hook until it runs again, which for a wake-up from another vCPU or a
// thread is later, on its own vCPU: so wake() marks the waiter woken, and a timeout or interrupt
// that comes after that leaves the primitive alone; one that was already inside the primitive
// (its lock taken to unlink the waiter, which it found gone) is waited for by wake() before it
// returns. A thread's timeout does the same.
#pragma once

#include <atomic>
#include <cstdint>

#include "gluon/common/clock.h"
#include "gluon/common/intrusive_list.h"
#include "gluon/runtime/detail/hot.h"
#include "gluon/runtime/prim_lock.h"

namespace gluon {

/// What a continuation waiter runs when it is woken: fn(ctx, result), on the waking thread.
using continuation_fn = void (*)(void* ctx, long result) noexcept;

/// A waiter resumes one of three targets: a fiber parked in park(), an OS thread blocked on the
/// futex `word`, or a continuation (a function and its context) that wake() calls. The third is
/// how code that is not a fiber (a C++20 task, a callback) waits on the same mutex, semaphore,
/// event and channel: the primitives' *_async entry points link such a waiter without parking,
/// and their cancel() unlinks it. A continuation runs on whichever thread wakes it, with the
/// primitive's lock released; it must not block (a task posts itself to its vCPU).
struct waiter {
    enum class target : uint8_t { fiber, thread, continuation };

    list_hook hook;
    detail::fiber_hot* fiber;  // the waiting fiber; nullptr: a thread or a continuation
    // A fiber's or a thread's wake state (detail::k_parked, ...); a thread's futex word too.
    std::atomic<uint32_t> word{0};
    long result = 0;
    void* data = nullptr;  // for the primitive (a channel's value slot, a reader flag, ...)
    continuation_fn resume = nullptr;
    void* resume_ctx;      // read only when resume is set
    waiter* next_woken;    // set when the waiter joins a woken_batch

    /// Prepares a waiter for the calling fiber or thread.
    waiter() noexcept : fiber(detail::t_hot ? detail::t_hot->current : nullptr) {}
    /// A continuation waiter: wake() calls fn(ctx, result).
    waiter(continuation_fn fn, void* ctx) noexcept : fiber(nullptr), resume(fn), resume_ctx(ctx) {}

    target kind() const noexcept {
        return fiber ? target::fiber : resume ? target::continuation : target::thread;
    }
};

/// Waiters taken off a primitive's list under its lock, to be woken once it is released. Each
/// is unlinked as it is taken, so a racing timeout, interrupt or cancel (which checks
/// hook.linked() under the same lock) sees that its wake-up is on its way and leaves it alone.
/// (A plain local waiter_list would keep them linked: the canceller would unlink them from the
/// waker's list while the waker walks it, and both would wake them.)
class woken_batch {
public:
    /// Takes every waiter of q (its lock held).
    void take_all(intrusive_list<waiter, &waiter::hook>& q) noexcept {
        while (waiter* w = q.pop_front()) add(*w);
    }
    /// Adds a waiter already unlinked from its list (its lock held).
    void add(waiter& w) noexcept {
        w.next_woken = nullptr;
        (tail_ ? tail_->next_woken : head_) = &w;
        tail_ = &w;
        ++count_;
    }
    size_t size() const noexcept { return count_; }
    /// Wakes them all, in order (call without the lock).
    void wake_all(long result) noexcept;
    /// Wakes them all with the lock still held: see detail::wake_holding_lock.
    void wake_all_holding_lock(long result) noexcept;

private:
    waiter* head_ = nullptr;
    waiter* tail_ = nullptr;
    size_t count_ = 0;
};

/// Returned by the primitives' *_async calls when the waiter was linked: its continuation will
/// be called with the outcome (0, or -errno).
inline constexpr long k_waiting = 1;

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
/// waiter::word of a fiber or a thread: parked (and linked, or being woken by its unlinker);
/// woken (from another thread: its timeout and interrupt leave the primitive alone); or being
/// cancelled (its own vCPU or thread is inside the primitive, which a waker waits out).
inline constexpr uint32_t k_parked = 0, k_woken = 1, k_cancelling = 2;

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
    // A plain store (the lock is held, so no waker sees it yet): a waiter parked again, after a
    // wake-up or a timeout, is parked anew.
    w.word.store(detail::k_parked, std::memory_order_relaxed);
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

/// Wakes a waiter that the caller has unlinked (under the primitive's lock); any thread, with
/// the lock released. Once it returns, the primitive is no longer needed for this waiter: a
/// timeout or interrupt still to reach it leaves the primitive alone (see the top of this file).
/// Waking a fiber of another vCPU, or a thread, it may wait for a timeout of that waiter that
/// is inside the primitive's lock at that moment; so it must not be called with that lock held.
void wake(waiter& w, long result) noexcept;

namespace detail {
/// wake() for a caller that still holds the lock of w's primitive: it does not wait for a
/// timeout or interrupt of w, which may be waiting for that lock, and so leaves w's cancel free
/// to take the lock later. Only for a waiter that holds part of the primitive once woken (a
/// shared_mutex reader, its read lock), so that the primitive outlives that cancel anyway.
void wake_holding_lock(waiter& w, long result) noexcept;
}  // namespace detail

inline void woken_batch::wake_all(long result) noexcept {
    waiter* w = head_;
    head_ = tail_ = nullptr;
    count_ = 0;
    while (w) {
        waiter* next = w->next_woken;  // before the wake-up: w may be gone after it
        wake(*w, result);
        w = next;
    }
}

inline void woken_batch::wake_all_holding_lock(long result) noexcept {
    waiter* w = head_;
    head_ = tail_ = nullptr;
    count_ = 0;
    while (w) {
        waiter* next = w->next_woken;
        detail::wake_holding_lock(*w, result);
        w = next;
    }
}

namespace detail {
/// Unlinks a continuation waiter from its primitive's list if no wake-up has claimed it yet
/// (`lk` not held on entry). True: it was unlinked and will never be woken; false: its wake-up
/// has been or is being delivered. The primitives' cancel() calls this.
inline bool cancel_linked(prim_lock& lk, waiter& w) noexcept {
    lk.lock();
    bool linked = w.hook.linked();
    if (linked) waiter_list::unlink(w);
    lk.unlock();
    return linked;
}
}  // namespace detail

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
