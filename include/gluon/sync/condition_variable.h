// Condition variable for fibers and threads; works with std::unique_lock<gluon::mutex> and any
// other BasicLockable (it is condition_variable_any-shaped). As with std, waits may wake
// spuriously: use the predicate overloads.
#pragma once

#include <chrono>
#include <condition_variable>

#include "gluon/common/clock.h"
#include "gluon/runtime/waiter.h"

namespace gluon {

class condition_variable {
public:
    condition_variable() = default;
    condition_variable(const condition_variable&) = delete;
    condition_variable& operator=(const condition_variable&) = delete;

    void notify_one() noexcept;
    void notify_all() noexcept;

    template <typename Lock>
    void wait(Lock& lock) {
        (void)wait_until_impl(lock, k_no_deadline, false);
    }
    template <typename Lock, typename Pred>
    void wait(Lock& lock, Pred pred) {
        while (!pred()) wait(lock);
    }
    template <typename Lock, typename Rep, typename Period>
    std::cv_status wait_for(Lock& lock, const std::chrono::duration<Rep, Period>& d) {
        return wait_until_impl(lock, deadline_after(to_duration(d)), false) == -ETIMEDOUT
                   ? std::cv_status::timeout
                   : std::cv_status::no_timeout;
    }
    template <typename Lock, typename Rep, typename Period, typename Pred>
    bool wait_for(Lock& lock, const std::chrono::duration<Rep, Period>& d, Pred pred) {
        const deadline_t dl = deadline_after(to_duration(d));
        while (!pred())
            if (wait_until_impl(lock, dl, false) == -ETIMEDOUT) return pred();
        return true;
    }
    /// Times out by Clock, as std's: a clock that is not steady (system_clock set back while
    /// waiting) may not have reached tp when CLOCK_MONOTONIC has gone as far as it had left;
    /// the wait then ends as a spurious wake-up, and the predicate overload waits on.
    template <typename Lock, typename Clock, typename Dur>
    std::cv_status wait_until(Lock& lock, const std::chrono::time_point<Clock, Dur>& tp) {
        if (wait_until_impl(lock, deadline_at(tp), false) != -ETIMEDOUT) return std::cv_status::no_timeout;
        return Clock::now() < tp ? std::cv_status::no_timeout : std::cv_status::timeout;
    }
    template <typename Lock, typename Clock, typename Dur, typename Pred>
    bool wait_until(Lock& lock, const std::chrono::time_point<Clock, Dur>& tp, Pred pred) {
        while (!pred())
            if (wait_until(lock, tp) == std::cv_status::timeout) return pred();
        return true;
    }
    /// Interruptible wait: returns 0, -ETIMEDOUT or -ECANCELED. The lock is re-held on return.
    template <typename Lock>
    long wait_interruptible(Lock& lock, deadline_t deadline = k_no_deadline) {
        return wait_until_impl(lock, deadline, true);
    }

private:
    template <typename Lock>
    long wait_until_impl(Lock& lock, deadline_t deadline, bool interruptible) {
        waiter w;
        lk_.lock();
        waiters_.push_back(w);
        // Enqueued before the user's lock is released: a notify after unlock cannot be lost.
        lock.unlock();
        long r = park(lk_, w, {.deadline = deadline, .interruptible = interruptible});
        lock.lock();
        return r;
    }

    prim_lock lk_;
    waiter_list waiters_;
};

using condition_variable_any = condition_variable;

}  // namespace gluon
