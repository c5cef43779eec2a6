// Reader-writer lock for fibers and threads. Phase-fair: once a writer waits, new readers
// queue behind it, so writers are not starved; and a writer's unlock lets in every reader that
// queued meanwhile before the next writer, so a stream of writers does not starve readers
// either. A waiting writer waits for the readers in at most one such batch, a waiting reader
// for at most one writer.
#pragma once

#include <chrono>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/runtime/waiter.h"

namespace gluon {

class shared_mutex {
public:
    shared_mutex() = default;
    shared_mutex(const shared_mutex&) = delete;
    shared_mutex& operator=(const shared_mutex&) = delete;

    void lock() noexcept { (void)lock_until(k_no_deadline, false); }
    bool try_lock() noexcept;
    /// Errors: ETIMEDOUT; ECANCELED if interruptible and interrupted.
    result<void> lock_until(deadline_t deadline, bool interruptible = true) noexcept;
    template <typename Rep, typename Period>
    bool try_lock_for(const std::chrono::duration<Rep, Period>& d) noexcept {
        return lock_until(deadline_after(to_duration(d)), false).has_value();
    }
    void unlock() noexcept;

    void lock_shared() noexcept { (void)lock_shared_until(k_no_deadline, false); }
    bool try_lock_shared() noexcept;
    /// Errors: as lock_until.
    result<void> lock_shared_until(deadline_t deadline, bool interruptible = true) noexcept;
    template <typename Rep, typename Period>
    bool try_lock_shared_for(const std::chrono::duration<Rep, Period>& d) noexcept {
        return lock_shared_until(deadline_after(to_duration(d)), false).has_value();
    }
    void unlock_shared() noexcept;

private:
    static void after_cancel(void* self) noexcept;
    void admit_readers_locked() noexcept;

    prim_lock lk_;
    int64_t readers_ = 0;
    bool writer_ = false;
    waiter_list writers_q_;
    waiter_list readers_q_;
};

using shared_timed_mutex = shared_mutex;

}  // namespace gluon
