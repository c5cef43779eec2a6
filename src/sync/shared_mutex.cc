#include "gluon/sync/shared_mutex.h"

#include "gluon/common/misuse.h"
#include "gluon/sync/wait_list.h"

namespace gluon {
// Wakes every queued reader (lk_ held). They own their read lock when they wake, so this
// mutex outlives a timeout or interrupt of theirs still to come: it may take lk_ then, and is
// not waited for (wake() would wait, holding lk_, for ever).
void shared_mutex::admit_readers_locked() noexcept {
    woken_batch woken;
    detail::take_all(readers_q_, woken);
    readers_ += static_cast<decltype(readers_)>(woken.size());
    woken.wake_all_holding_lock(0);
}

// A queued writer gave up: readers that queued only because of it may go now.
void shared_mutex::after_cancel(void* p) noexcept {
    auto* self = static_cast<shared_mutex*>(p);
    if (!self->writer_ && self->writers_q_.empty()) self->admit_readers_locked();
}

bool shared_mutex::try_lock() noexcept {
    lk_.lock();
    bool ok = !writer_ && readers_ == 0;
    if (ok) writer_ = true;
    lk_.unlock();
    return ok;
}

result<void> shared_mutex::lock_until(deadline_t deadline, bool interruptible) noexcept {
    lk_.lock();
    if (!writer_ && readers_ == 0) {
        writer_ = true;
        lk_.unlock();
        return {};
    }
    waiter w;
    return detail::park_result(detail::wait_in(lk_, writers_q_, w,
                                     {.deadline = deadline,
                                      .interruptible = interruptible,
                                      .after_cancel = after_cancel,
                                      .primitive = this}));
}

void shared_mutex::unlock() noexcept {
    lk_.lock();
    if (!writer_) {
        lk_.unlock();
        detail::report_misuse("unlocking a gluon::shared_mutex that is not write-locked");
        return;
    }
    writer_ = false;
    // Readers that queued while this writer held the lock go before the next writer (which
    // then has them to wait for, and no reader that comes after it): handing it straight to
    // the next writer left them queued for as long as writers kept coming.
    if (readers_q_.empty()) {
        if (waiter* w = writers_q_.pop_front()) {
            writer_ = true;  // handed to the next writer
            lk_.unlock();
            wake(*w, 0);
            return;
        }
    }
    admit_readers_locked();
    lk_.unlock();
}

bool shared_mutex::try_lock_shared() noexcept {
    lk_.lock();
    bool ok = !writer_ && writers_q_.empty();
    if (ok) ++readers_;
    lk_.unlock();
    return ok;
}

result<void> shared_mutex::lock_shared_until(deadline_t deadline, bool interruptible) noexcept {
    lk_.lock();
    if (!writer_ && writers_q_.empty()) {
        ++readers_;
        lk_.unlock();
        return {};
    }
    waiter w;
    return detail::park_result(
        detail::wait_in(lk_, readers_q_, w, {.deadline = deadline, .interruptible = interruptible}));
}

void shared_mutex::unlock_shared() noexcept {
    lk_.lock();
    if (readers_ <= 0) {
        lk_.unlock();
        detail::report_misuse("unlock_shared on a gluon::shared_mutex that is not read-locked");
        return;
    }
    if (--readers_ == 0) {
        if (waiter* w = writers_q_.pop_front()) {
            writer_ = true;
            lk_.unlock();
            wake(*w, 0);
            return;
        }
    }
    lk_.unlock();
}

}  // namespace gluon
