// Counting semaphore, latch, event and wait_group for fibers and threads (safe across vCPUs).
#pragma once

#include <cstddef>
#include <cstdint>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/runtime/waiter.h"

namespace gluon {

class counting_semaphore {
public:
    constexpr explicit counting_semaphore(int64_t initial = 0) noexcept : count_(initial) {}
    counting_semaphore(const counting_semaphore&) = delete;
    counting_semaphore& operator=(const counting_semaphore&) = delete;

    /// Adds n permits, waking waiters in FIFO order.
    void release(int64_t n = 1) noexcept;
    /// Takes one permit. Errors: ETIMEDOUT, ECANCELED (interrupted).
    result<void> acquire(duration timeout = forever) noexcept;
    bool try_acquire() noexcept;
    /// For waiters that are not fibers (see waiter.h): takes a permit now (0) or links the
    /// continuation waiter `w` (k_waiting), called with 0 once a permit is its own.
    long acquire_async(waiter& w) noexcept;
    /// Unlinks a waiter of acquire_async that has no permit yet. True: it never will have one.
    bool cancel(waiter& w) noexcept { return detail::cancel_linked(lk_, w); }
    int64_t available() const noexcept;

private:
    mutable prim_lock lk_;
    int64_t count_;
    waiter_list waiters_;
};

/// A one-shot countdown: wait() returns once the count reaches zero.
class latch {
public:
    constexpr explicit latch(int64_t count) noexcept : count_(count) {}
    latch(const latch&) = delete;
    latch& operator=(const latch&) = delete;
    void count_down(int64_t n = 1) noexcept;
    bool try_wait() const noexcept;
    /// Errors: ETIMEDOUT, ECANCELED (interrupted).
    result<void> wait(duration timeout = forever) noexcept;
    /// Errors: ECANCELED (interrupted; the count was taken down all the same).
    result<void> arrive_and_wait(int64_t n = 1) noexcept {
        count_down(n);
        return wait();
    }

protected:
    mutable prim_lock lk_;
    int64_t count_;
    waiter_list waiters_;
};

/// Go-style wait group: add() before starting work, done() when it ends, wait() for all.
class wait_group : private latch {
public:
    wait_group() noexcept : latch(0) {}
    void add(int64_t n = 1) noexcept;
    void done() noexcept { count_down(1); }
    using latch::try_wait;
    using latch::wait;
};

/// A manual-reset event: set() releases every waiter until reset().
class event {
public:
    explicit event(bool initially_set = false) noexcept : set_(initially_set) {}
    event(const event&) = delete;
    event& operator=(const event&) = delete;
    void set() noexcept;
    void reset() noexcept;
    bool is_set() const noexcept;
    /// Errors: ETIMEDOUT, ECANCELED.
    result<void> wait(duration timeout = forever) noexcept;
    /// For waiters that are not fibers (see waiter.h): 0 if set now, else links the
    /// continuation waiter `w` (k_waiting), called with 0 by set().
    long wait_async(waiter& w) noexcept;
    /// Unlinks a waiter of wait_async that set() has not woken. True: it never will be.
    bool cancel(waiter& w) noexcept { return detail::cancel_linked(lk_, w); }

private:
    mutable prim_lock lk_;
    bool set_;
    waiter_list waiters_;
};

}  // namespace gluon
