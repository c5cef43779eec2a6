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

void wait_base::on_cancel(cancel_hook* c, int err) noexcept {
    auto* self = static_cast<wait_base*>(c);
    if (!self->unlink()) return;  // the wake-up is on its way
    self->res_ = -err;
    static_cast<task_sched*>(self->sched_)->schedule(self->h_);
}

// Runs on the waking thread, with the primitive's lock released.
void wait_base::on_wake(void* p, long r) noexcept {
    auto* self = static_cast<wait_base*>(p);
    self->res_ = r;
    auto* s = static_cast<task_sched*>(self->sched_);
    if (s == t_sched) {
        s->schedule(self->h_);
        return;
    }
    self->wake_.fn = [](vcpu_call* c) noexcept {
        auto* w = reinterpret_cast<wait_base*>(reinterpret_cast<char*>(c) - offsetof(wait_base, wake_));
        static_cast<task_sched*>(w->sched_)->schedule(w->h_);
    };
    (void)post_call(s->vcpu, self->wake_);
}

}  // namespace gluon::co::sync_detail
