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
    if (locked_) detail::report_misuse("destroying a locked gluon::mutex");
}

bool mutex::try_lock() noexcept {
    lk_.lock();
    const bool ok = !locked_;
    if (ok) {
        locked_ = true;
        owner_ = current_owner_token();
    }
    lk_.unlock();
    return ok;
}

result<void> mutex::lock_until(deadline_t deadline, bool interruptible) noexcept {
    lk_.lock();
    if (!locked_) {
        locked_ = true;
        owner_ = current_owner_token();
        lk_.unlock();
        return {};
    }
    waiter w;
    long r = detail::wait_in(lk_, waiters_, w, {.deadline = deadline, .interruptible = interruptible});
    if (r < 0) return errno_error(static_cast<int>(-r));
    // unlock() handed the mutex to us: it is still locked, now on our behalf.
    lk_.lock();
    owner_ = current_owner_token();
    lk_.unlock();
    return {};
}

void mutex::unlock() noexcept { unlock(current_owner_token()); }

void mutex::unlock(uintptr_t me) noexcept {
    lk_.lock();
    if (!locked_ || owner_ != me) {
        lk_.unlock();
        detail::report_misuse("unlocking a gluon::mutex that the caller does not hold");
        return;
    }
    waiter* w = waiters_.pop_front();
    // Hand-off: the mutex stays locked for w. A fiber records itself as the owner when it
    // resumes; a continuation cannot, so its owner token (in w->data) is recorded here.
    owner_ = w && w->resume ? reinterpret_cast<uintptr_t>(w->data) : 0;
    if (!w) locked_ = false;
    lk_.unlock();
    if (w) wake(*w, 0);
}

long mutex::lock_async(waiter& w, uintptr_t owner) noexcept {
    lk_.lock();
    if (!locked_) {
        locked_ = true;
        owner_ = owner;
        lk_.unlock();
        return 0;
    }
    w.data = reinterpret_cast<void*>(owner);
    waiters_.push_back(w);
    lk_.unlock();
    return k_waiting;
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
