#include "gluon/sync/semaphore.h"

#include "gluon/sync/wait_list.h"

namespace gluon {
void counting_semaphore::release(int64_t n) noexcept {
    woken_batch woken;
    lk_.lock();
    count_ += n;
    // A woken waiter owns its permit already (taken here), so none can be stolen meanwhile.
    while (count_ > 0 && !waiters_.empty()) {
        woken.add(*waiters_.pop_front());
        --count_;
    }
    lk_.unlock();
    detail::wake_all(woken, 0);
}

result<void> counting_semaphore::acquire(duration timeout) noexcept {
    lk_.lock();
    if (count_ > 0) {
        --count_;
        lk_.unlock();
        return {};
    }
    waiter w;
    return detail::park_result(detail::wait_in(lk_, waiters_, w, {.deadline = deadline_after(timeout)}));
}

long counting_semaphore::acquire_async(waiter& w) noexcept {
    lk_.lock();
    if (count_ > 0) {
        --count_;
        lk_.unlock();
        return 0;
    }
    waiters_.push_back(w);
    lk_.unlock();
    return k_waiting;
}

bool counting_semaphore::try_acquire() noexcept {
    lk_.lock();
    bool ok = count_ > 0;
    if (ok) --count_;
    lk_.unlock();
    return ok;
}

int64_t counting_semaphore::available() const noexcept {
    lk_.lock();
    int64_t c = count_;
    lk_.unlock();
    return c;
}

void latch::count_down(int64_t n) noexcept {
    woken_batch woken;
    lk_.lock();
    count_ -= n;
    if (count_ <= 0) detail::take_all(waiters_, woken);
    lk_.unlock();
    detail::wake_all(woken, 0);
}

bool latch::try_wait() const noexcept {
    lk_.lock();
    bool done = count_ <= 0;
    lk_.unlock();
    return done;
}

result<void> latch::wait(duration timeout) noexcept {
    lk_.lock();
    if (count_ <= 0) {
        lk_.unlock();
        return {};
    }
    waiter w;
    return detail::park_result(detail::wait_in(lk_, waiters_, w, {.deadline = deadline_after(timeout)}));
}

void wait_group::add(int64_t n) noexcept {
    if (n < 0) return count_down(-n);
    lk_.lock();
    count_ += n;
    lk_.unlock();
}

void event::set() noexcept {
    woken_batch woken;
    lk_.lock();
    set_ = true;
    detail::take_all(waiters_, woken);
    lk_.unlock();
    detail::wake_all(woken, 0);
}

void event::reset() noexcept {
    lk_.lock();
    set_ = false;
    lk_.unlock();
}

long event::wait_async(waiter& w) noexcept {
    lk_.lock();
    if (set_) {
        lk_.unlock();
        return 0;
    }
    waiters_.push_back(w);
    lk_.unlock();
    return k_waiting;
}

bool event::is_set() const noexcept {
    lk_.lock();
    bool s = set_;
    lk_.unlock();
    return s;
}

result<void> event::wait(duration timeout) noexcept {
    lk_.lock();
    if (set_) {
        lk_.unlock();
        return {};
    }
    waiter w;
    return detail::park_result(detail::wait_in(lk_, waiters_, w, {.deadline = deadline_after(timeout)}));
}

}  // namespace gluon
