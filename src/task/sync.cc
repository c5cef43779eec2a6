#include "gluon/task/sync.h"

#include "sched.h"

namespace gluon::co::sync_detail {
using task_detail::t_sched;
using task_detail::task_sched;

bool wait_base::prepare(std::coroutine_handle<> h, task_detail::task_ctx* ctx) noexcept {
    ctx_ = ctx;
    if (ctx && ctx->cancelled) {
        res_ = -ctx->cancelled;
        return false;
    }
    h_ = h;
    sched_ = t_sched;
    return true;
}

bool wait_base::linked(long r) noexcept {
    if (r != k_waiting) {
        res_ = r;
        return false;
    }
    // Linked: the wake-up may come from another thread at any moment, but it only posts to
    // this vCPU, so nothing below races with it.
    if (ctx_) {
        fn = on_cancel;
        ctx_->hook = this;
    }
    if (timeout_ != forever)
        (void)timer_.arm(timeout_deadline(timeout_), [](vcpu_timer* t) noexcept {
            auto* self = reinterpret_cast<wait_base*>(reinterpret_cast<char*>(t) - offsetof(wait_base, timer_));
            on_cancel(self, ETIMEDOUT);
        });
    return true;
}

long wait_base::finish() noexcept {
    if (ctx_ && ctx_->hook == this) ctx_->hook = nullptr;
    timer_.disarm();
    return res_;
}

// On the task's vCPU. The hook and the timer outlive the wake-up until the task runs: a
// cancel or timeout after it must not touch the primitive, which may be gone by then.
void wait_base::on_cancel(cancel_hook* c, int err) noexcept {
    auto* self = static_cast<wait_base*>(c);
    uint8_t st = k_linked;
    if (!self->state_.compare_exchange_strong(st, k_unlinking, std::memory_order_acquire))
        return;  // woken (its wake-up is on its way), or unlinked already
    if (!self->cancel_err_) self->cancel_err_ = err;
    if (!self->unlink()) {
        // The wake-up is on its way; a waker that must wait for us does so until this store.
        st = k_unlinking;
        (void)self->state_.compare_exchange_strong(st, k_linked, std::memory_order_release);
        return;
    }
    self->state_.store(k_done, std::memory_order_relaxed);  // never woken now
    self->res_ = -err;
    static_cast<task_sched*>(self->sched_)->schedule(self->h_);
}

// Runs on the waking thread, with the primitive's lock released.
void wait_base::on_wake(void* p, long r) noexcept {
    auto* self = static_cast<wait_base*>(p);
    self->res_ = r;
    auto* s = static_cast<task_sched*>(self->sched_);
    if (s == t_sched) {
        // on_cancel runs on this thread too, so it is not inside unlink() now.
        self->state_.store(k_done, std::memory_order_relaxed);
        s->schedule(self->h_);
        return;
    }
    if (self->waker_waits_) {
        // The caller may destroy the primitive once we return: a cancel that the task's vCPU
        // is making inside it (a lock taken and released, so not for long) ends first.
        uint8_t st = k_linked;
        while (!self->state_.compare_exchange_weak(st, k_done, std::memory_order_acq_rel)) {
            st = k_linked;
            __builtin_ia32_pause();
        }
    } else {
        self->state_.store(k_done, std::memory_order_release);
    }
    self->wake_.fn = [](vcpu_call* c) noexcept {
        auto* w = reinterpret_cast<wait_base*>(reinterpret_cast<char*>(c) - offsetof(wait_base, wake_));
        static_cast<task_sched*>(w->sched_)->schedule(w->h_);
    };
    (void)post_call(s->vcpu, self->wake_);
}

}  // namespace gluon::co::sync_detail
