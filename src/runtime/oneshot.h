// One waiter (fiber or thread) waits for one signal from any thread. Private to the runtime.
#pragma once

#include "gluon/runtime/waiter.h"

namespace gluon::detail {

class oneshot {
public:
    /// Construct it in the context that will wait().
    oneshot() noexcept = default;
    oneshot(const oneshot&) = delete;
    oneshot& operator=(const oneshot&) = delete;

    /// Returns once signal() has been called (before or after this call). Not interruptible.
    void wait() noexcept {
        lk_.lock();
        if (done_) {
            lk_.unlock();
            return;
        }
        q_.push_back(w_);
        (void)park(lk_, w_, {.interruptible = false});
    }
    /// Any thread. After it returns, `this` is not touched again, so the waiter may free it.
    void signal() noexcept {
        lk_.lock();
        done_ = true;
        waiter* w = q_.pop_front();
        lk_.unlock();
        if (w) wake(*w, 0);
    }

private:
    prim_lock lk_{prim_lock::shared};  // signalled from other threads by design
    waiter_list q_;
    waiter w_;
    bool done_ = false;
};

}  // namespace gluon::detail
