#include "gluon/sync/condition_variable.h"

#include "gluon/sync/wait_list.h"

namespace gluon {

void condition_variable::notify_one() noexcept {
    lk_.lock();
    waiter* w = waiters_.pop_front();
    lk_.unlock();
    if (w) wake(*w, 0);
}

void condition_variable::notify_all() noexcept {
    woken_batch all;
    lk_.lock();
    detail::take_all(waiters_, all);
    lk_.unlock();
    detail::wake_all(all, 0);
}

}  // namespace gluon
