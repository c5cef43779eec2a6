#include "gluon/task/io.h"

#include <algorithm>

#include "gluon/runtime/fd.h"
#include "sched.h"

namespace gluon::co {
using task_detail::t_sched;

bool op_awaitable::start(std::coroutine_handle<> h, task_detail::task_ctx* ctx) noexcept {
    ctx_ = ctx;
    if (ctx && ctx->cancelled) {
        res_ = -ctx->cancelled;
        return false;
    }
    task_detail::task_sched* s = t_sched;
    if ((!s && !(s = task_detail::sched_here())) || (!eng_ && !(eng_ = s->eng))) {
        res_ = -EPERM;
        return false;
    }
    op_.user = this;
    op_.on_complete = on_complete;
    const long r = eng_->submit(op_);
    if (r != engine::engine::pending) {
        res_ = r;
        return false;
    }
    h_ = h;
    ++s->submitted;
    if (ctx) {
        fn = [](cancel_hook* c, int err) noexcept {
            auto* a = static_cast<op_awaitable*>(c);
            a->eng_->cancel(a->op_, err);
            a->eng_->flush();
        };
        ctx->hook = this;
    }
    if (timeout_ != forever) [[unlikely]]
        (void)timer_.arm(timeout_deadline(timeout_), [](vcpu_timer* t) noexcept {
            auto* a = reinterpret_cast<op_awaitable*>(reinterpret_cast<char*>(t) - offsetof(op_awaitable, timer_));
            a->eng_->cancel(a->op_, ETIMEDOUT);
            a->eng_->flush();
        });
    return true;
}

void op_awaitable::on_complete(engine::io_op* op, long r) {
    auto* a = static_cast<op_awaitable*>(op->user);
    a->res_ = r;
    if (a->ctx_) a->ctx_->hook = nullptr;  // completed: nothing left to cancel
    a->timer_.disarm();
    t_sched->schedule(a->h_);
}

bool sleep_awaitable::start(std::coroutine_handle<> h, task_detail::task_ctx* ctx) noexcept {
    ctx_ = ctx;
    if (ctx && ctx->cancelled) {
        res_ = -ctx->cancelled;
        return false;
    }
    h_ = h;
    auto armed = timer_.arm(deadline_, [](vcpu_timer* t) noexcept {
        auto* a = reinterpret_cast<sleep_awaitable*>(reinterpret_cast<char*>(t) - offsetof(sleep_awaitable, timer_));
        if (a->ctx_) a->ctx_->hook = nullptr;
        t_sched->schedule(a->h_);
    });
    if (!armed) {
        res_ = -EPERM;
        return false;
    }
    if (ctx) {
        fn = [](cancel_hook* c, int err) noexcept {
            auto* a = static_cast<sleep_awaitable*>(c);
            a->timer_.disarm();
            a->ctx_->hook = nullptr;
            a->res_ = -err;
            t_sched->schedule(a->h_);
        };
        ctx->hook = this;
    }
    return true;
}

void yield_awaitable::schedule(std::coroutine_handle<> h) noexcept { t_sched->schedule(h); }

// As gluon::run_connect: a full Unix backlog's EAGAIN has no readiness to wait for, only time.
task<result<void>> connect(int fd, const sockaddr* addr, socklen_t len, duration timeout) {
    const deadline_t d = timeout_deadline(timeout);
    duration pause = fd::k_connect_pause_first;
    for (;;) {
        const long r = co_await op_awaitable(engine::io_op::connect(fd, addr, len), time_left(d));
        if (r != -EAGAIN) co_return void_from_syscall(r);
        const int64_t now = mono_now_ns();
        if (now >= d) co_return errno_error(ETIMEDOUT);
        const bool last = d - now <= pause.count();
        if (auto slept = co_await sleep_until(last ? d : now + pause.count()); !slept) co_return slept;
        if (last) co_return errno_error(ETIMEDOUT);  // (no attempt at the deadline: see run_connect)
        pause = std::min(pause * 2, fd::k_connect_pause_max);
    }
}

task<result<void>> send_all(int fd, const void* buf, size_t n, duration timeout) {
    auto* p = static_cast<const char*>(buf);
    step_timeouts steps(timeout);  // one deadline for the whole call, as fd::send_all
    while (n > 0) {
        auto r = co_await send_some(fd, p, n, 0, steps.next());
        if (!r) co_return unexpected(r.error());
        if (*r == 0) co_return errno_error(EPIPE);
        p += *r;
        n -= *r;
    }
    co_return result<void>{};
}

task<result<void>> recv_exactly(int fd, void* buf, size_t n, duration timeout) {
    auto* p = static_cast<char*>(buf);
    step_timeouts steps(timeout);  // one deadline for the whole call, as fd::recv_exactly
    while (n > 0) {
        auto r = co_await recv_some(fd, p, n, 0, steps.next());
        if (!r) co_return unexpected(r.error());
        if (*r == 0) co_return errno_error(ENODATA);
        p += *r;
        n -= *r;
    }
    co_return result<void>{};
}

}  // namespace gluon::co
