// A one-shot completion: one waiter (a fiber or a plain thread) waits until another party,
// on any thread, signals it. What engines outside the vCPU's own (libaio, POSIX AIO, the
// offload pool) use to hand a result back to the fiber that is waiting for it.
#pragma once

#include "gluon/runtime/waiter.h"

namespace gluon {

class oneshot {
public:
    /// Construct it in the context that will wait().
    oneshot() noexcept = default;
    oneshot(const oneshot&) = delete;
    oneshot& operator=(const oneshot&) = delete;

    /// Returns once signal() has been called (before or after this call). Not interruptible.
    void wait() noexcept { (void)wait_until(k_no_deadline, false); }
    /// Waits for signal() up to the deadline: 0, or -ETIMEDOUT / -ECANCELED (interrupted,
    /// when interruptible). After an error the oneshot may be waited on again.
    long wait_until(deadline_t deadline, bool interruptible = true) noexcept {
        lk_.lock();
        if (done_) {
            lk_.unlock();
            return 0;
        }
        q_.push_back(w_);
        return park(lk_, w_, {.deadline = deadline, .interruptible = interruptible});
    }
    bool signalled() noexcept {
        lk_.lock();
        bool d = done_;
        lk_.unlock();
        return d;
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

}  // namespace gluon
