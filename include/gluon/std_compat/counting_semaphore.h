// std::counting_semaphore and std::binary_semaphore for fibers, over gluon::counting_semaphore:
// acquire parks the fiber, not the vCPU's thread, so the fiber that releases may be one of the
// same vCPU. Safe across vCPUs and plain threads.
#pragma once

#include <chrono>
#include <cstddef>
#include <limits>
#include <system_error>

#include "gluon/common/clock.h"
#include "gluon/runtime/waiter.h"
#include "gluon/sync/semaphore.h"

namespace gluon::std_compat {

template <std::ptrdiff_t LeastMaxValue = std::numeric_limits<std::ptrdiff_t>::max()>
class counting_semaphore {
    static_assert(LeastMaxValue >= 0, "counting_semaphore's LeastMaxValue must not be negative");

public:
    static constexpr std::ptrdiff_t max() noexcept { return LeastMaxValue; }

    /// As std's: desired is in [0, max()].
    constexpr explicit counting_semaphore(std::ptrdiff_t desired) : sem_(desired) {}
    counting_semaphore(const counting_semaphore&) = delete;
    counting_semaphore& operator=(const counting_semaphore&) = delete;

    /// As std's: update >= 0, and the count stays within max().
    void release(std::ptrdiff_t update = 1) { sem_.release(update); }
    /// As std::counting_semaphore::acquire, not interruptible: an interrupt of the calling fiber
    /// stays pending for its next blocking call, as for thread::join.
    void acquire() { (void)acquire_by(k_no_deadline); }
    bool try_acquire() noexcept { return sem_.try_acquire(); }
    /// As acquire, for d at most. False: no permit came in time.
    template <typename Rep, typename Period>
    bool try_acquire_for(const std::chrono::duration<Rep, Period>& d) {
        return acquire_by(deadline_after(to_duration(d)));
    }
    /// As acquire, until tp's own clock has reached tp, as std's (a deadline worked out once
    /// would end early while a clock that is not steady lags).
    template <typename Clock, typename Dur>
    bool try_acquire_until(const std::chrono::time_point<Clock, Dur>& tp) {
        for (;;) {
            if (acquire_by(deadline_at(tp))) return true;
            if (Clock::now() >= tp) return false;
        }
    }

private:
    // The acquire of gluon's semaphore ends for an interrupt without a permit (the waiter was
    // unlinked before a release could hand it one): wait on, and give the interrupt back.
    bool acquire_by(deadline_t deadline) noexcept {
        bool interrupted = false;
        auto r = sem_.acquire(time_left(deadline));
        for (; !r && r.error() == std::errc::operation_canceled;
             r = sem_.acquire(time_left(deadline)))
            interrupted = true;
        if (interrupted) restore_interrupt();
        return r.has_value();
    }

    gluon::counting_semaphore sem_;
};

using binary_semaphore = counting_semaphore<1>;

}  // namespace gluon::std_compat
