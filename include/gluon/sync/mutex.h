// Fiber mutexes. Safe across vCPUs and plain threads; contention parks only the fiber.
// The lock is handed directly to the next waiter on unlock (FIFO, no starvation).
#pragma once

#include <atomic>
#include <chrono>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/runtime/waiter.h"

namespace gluon {

class mutex {
public:
    mutex() = default;
    mutex(const mutex&) = delete;
    mutex& operator=(const mutex&) = delete;
    /// Destroying a locked mutex is misuse (debug: abort with a message).
    ~mutex();

    /// Not interruptible (an interrupt stays pending), as std::mutex::lock.
    void lock() noexcept { (void)lock_until(k_no_deadline, false); }
    bool try_lock() noexcept;
    /// Waits until the deadline. Errors: ETIMEDOUT; ECANCELED if interruptible and interrupted.
    result<void> lock_until(deadline_t deadline, bool interruptible = true) noexcept;
    /// Errors: as lock_until.
    result<void> lock_for(duration d, bool interruptible = true) noexcept {
        return lock_until(deadline_after(d), interruptible);
    }
    template <typename Rep, typename Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period>& d) noexcept {
        return lock_until(deadline_after(to_duration(d)), false).has_value();
    }
    /// Gives up once tp's own clock has reached tp, as std's does (a deadline worked out once
    /// would end early while a clock that is not steady lags).
    template <typename Clock, typename Dur>
    bool try_lock_until(const std::chrono::time_point<Clock, Dur>& tp) noexcept {
        for (;;) {
            if (lock_until(deadline_at(tp), false)) return true;
            if (Clock::now() >= tp) return false;
        }
    }
    /// Unlocking a mutex the caller does not hold is misuse.
    void unlock() noexcept;

    /// For waiters that are not fibers (see waiter.h): takes the mutex now (0) or links the
    /// continuation waiter `w` (k_waiting), which is called with 0 once the mutex is handed to
    /// it. `owner` identifies the holder (any non-zero value unique to it) for unlock(owner).
    long lock_async(waiter& w, uintptr_t owner) noexcept;
    /// Releases a mutex taken with lock_async by `owner`. Misuse if owner does not hold it.
    void unlock(uintptr_t owner) noexcept;
    /// Unlinks a waiter of lock_async that has not been handed the mutex. True: it never will
    /// be; false: the hand-off has happened or is on its way (the continuation runs).
    bool cancel(waiter& w) noexcept { return detail::cancel_linked(lk_, w); }

    /// A token for the calling fiber or thread (for ownership checks).
    static uintptr_t current_owner_token() noexcept;

private:
    // All state is guarded by lk_, which costs no atomic operation while the mutex is used
    // from one vCPU only (prim_lock's bias).
    prim_lock lk_;
    bool locked_ = false;
    uintptr_t owner_ = 0;
    waiter_list waiters_;
};

/// std::timed_mutex-shaped: gluon::mutex already has the timed operations.
using timed_mutex = mutex;

class recursive_mutex {
public:
    void lock() noexcept;
    bool try_lock() noexcept;
    /// Errors: ETIMEDOUT; ECANCELED if interruptible and interrupted.
    result<void> lock_for(duration d, bool interruptible = true) noexcept;
    template <typename Rep, typename Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period>& d) noexcept {
        return lock_for(to_duration(d), false).has_value();
    }
    void unlock() noexcept;

private:
    mutex m_;
    std::atomic<uintptr_t> owner_{0};
    unsigned depth_ = 0;
};

using recursive_timed_mutex = recursive_mutex;

}  // namespace gluon
