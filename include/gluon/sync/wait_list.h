// Helpers shared by the sync primitives: a prim_lock-protected list of waiters.
#pragma once

#include "gluon/common/result.h"
#include "gluon/runtime/waiter.h"

namespace gluon::detail {

/// Links a waiter for the caller and parks it; `lk` is held on entry and released.
inline long wait_in(prim_lock& lk, waiter_list& q, waiter& w, const park_options& o = {}) noexcept {
    q.push_back(w);
    return park(lk, w, o);
}

/// Unlinks every waiter of q (lk held) so they can be woken after lk is released.
inline void take_all(waiter_list& q, woken_batch& out) noexcept { out.take_all(q); }

/// Wakes every waiter taken with take_all.
inline void wake_all(woken_batch& b, long result) noexcept { b.wake_all(result); }

/// A park() outcome as a result: 0 is success, -errno an error.
inline result<void> park_result(long r) noexcept {
    if (r < 0) return errno_error(static_cast<int>(-r));
    return {};
}

}  // namespace gluon::detail
