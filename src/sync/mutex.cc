#include "gluon/sync/mutex.h"

#include "gluon/common/misuse.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sync/wait_list.h"

namespace gluon {

uintptr_t mutex::current_owner_token() noexcept {
    // A fiber id, or the thread-derived id outside a vCPU: unique either way.
    return static_cast<uintptr_t>(this_fiber::id());
}

mutex::~mutex() {
    if (state_.load(std::memory_order_relaxed) != 0) detail::report_misuse("destroying a locked gluon::mutex");
}

long mutex::lock_slow(deadline_t deadline, bool interruptible) noexcept {
    lk_.lock();
    for (;;) {
        uint32_t s = state_.load(std::memory_order_relaxed);
        if (s == 0) {
            if (state_.compare_exchange_weak(s, 1, std::memory_order_acquire)) {
                lk_.unlock();
                return 0;
            }
            continue;
        }
        if (s == 2 || state_.compare_exchange_weak(s, 2, std::memory_order_relaxed)) break;
    }
    waiter w;
    // On success the lock was handed to us by unlock(): state_ already says locked.
    return detail::wait_in(lk_, waiters_, w, {.deadline = deadline, .interruptible = interruptible});
}

result<void> mutex::lock_until(deadline_t deadline, bool interruptible) noexcept {
    if (try_lock()) return {};
    if (long r = lock_slow(deadline, interruptible); r < 0) return errno_error(static_cast<int>(-r));
    owner_ = current_owner_token();
    return {};
}

void mutex::unlock() noexcept {
    if (owner_ != current_owner_token()) {
        detail::report_misuse("unlocking a gluon::mutex that the caller does not hold");
        if (state_.load(std::memory_order_relaxed) == 0) return;
    }
    owner_ = 0;
    uint32_t expected = 1;
    if (state_.compare_exchange_strong(expected, 0, std::memory_order_release)) return;
    lk_.lock();
    waiter* w = waiters_.pop_front();
    if (!w) {
        state_.store(0, std::memory_order_release);
        lk_.unlock();
        return;
    }
    // Hand-off: the mutex stays locked and now belongs to w.
    if (waiters_.empty()) state_.store(1, std::memory_order_relaxed);
    lk_.unlock();
    wake(*w, 0);
}

void recursive_mutex::lock() noexcept {
    uintptr_t me = mutex::current_owner_token();
    if (owner_.load(std::memory_order_relaxed) == me) {
        ++depth_;
        return;
    }
    m_.lock();
    owner_.store(me, std::memory_order_relaxed);
    depth_ = 1;
}

bool recursive_mutex::try_lock() noexcept {
    uintptr_t me = mutex::current_owner_token();
    if (owner_.load(std::memory_order_relaxed) == me) {
        ++depth_;
        return true;
    }
    if (!m_.try_lock()) return false;
    owner_.store(me, std::memory_order_relaxed);
    depth_ = 1;
    return true;
}

result<void> recursive_mutex::lock_for(duration d, bool interruptible) noexcept {
    uintptr_t me = mutex::current_owner_token();
    if (owner_.load(std::memory_order_relaxed) == me) {
        ++depth_;
        return {};
    }
    auto r = m_.lock_for(d, interruptible);
    if (!r) return r;
    owner_.store(me, std::memory_order_relaxed);
    depth_ = 1;
    return {};
}

void recursive_mutex::unlock() noexcept {
    if (owner_.load(std::memory_order_relaxed) != mutex::current_owner_token()) {
        detail::report_misuse("unlocking a gluon::recursive_mutex that the caller does not hold");
        return;
    }
    if (--depth_ == 0) {
        owner_.store(0, std::memory_order_relaxed);
        m_.unlock();
    }
}

}  // namespace gluon
