// The sync primitives of gluon/sync, awaited by tasks: one mutex, event, semaphore or channel
// serves fibers, threads and tasks together, in one FIFO (ADR 0012: a task waits as a
// continuation waiter). Also a task awaiting a fiber's end. Every wait takes an optional
// timeout (ETIMEDOUT) and ends with ECANCELED when the task is cancelled. As with fibers, the
// code that wakes a task's wait (a set, a release, a send) may destroy the primitive once that
// call returns, before the task runs: a cancel or timeout reaching the task then leaves the
// primitive alone, and the wait gives what woke it.
#pragma once

#include <atomic>
#include <coroutine>
#include <cstdint>
#include <optional>
#include <utility>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu_call.h"
#include "gluon/runtime/waiter.h"
#include "gluon/sync/channel.h"
#include "gluon/sync/mutex.h"
#include "gluon/sync/semaphore.h"
#include "gluon/task/task.h"

namespace gluon::co {

namespace sync_detail {


/// A task's wait on a primitive: a continuation waiter that resumes the task on its vCPU.
///
/// Once woken, the wait never looks at its primitive again: the code that woke it may destroy
/// the primitive as soon as the wake-up returns (as it may when it woke fibers), while the
/// task's cancel hook and timer stay set until the task runs. A cancel or timeout reaching the
/// wait after its wake-up leaves it alone, and one in progress on the task's vCPU when a
/// wake-up comes from another thread is waited for by that wake-up (see on_wake).
class wait_base : protected task_detail::cancel_hook {
protected:
    /// waker_waits: false for a wait whose wake-up comes under a lock that unlink() takes (a
    /// join: fiber_exit wakes under the fiber's join_lock), and whose primitive outlives the
    /// wake-up anyway (the join's own reference keeps the fiber's record).
    explicit wait_base(duration timeout, bool waker_waits = true) noexcept
        : w_(&on_wake, this), timeout_(timeout), waker_waits_(waker_waits) {}
    wait_base(const wait_base&) = delete;
    /// Before linking: false if the task is cancelled already (res_ says so).
    bool prepare(std::coroutine_handle<> h, task_detail::task_ctx* ctx) noexcept;
    /// After the primitive's *_async returned r: true if the task must suspend.
    bool linked(long r) noexcept;
    /// In await_resume.
    long finish() noexcept;
    /// Unlinks w_ from its primitive if no wake-up has claimed it (true: it never will be).
    virtual bool unlink() noexcept = 0;

    waiter w_;
    long res_ = 0;
    int cancel_err_ = 0;  // the first cancel or timeout that reached the wait (ECANCELED, ETIMEDOUT)

private:
    static void on_wake(void* self, long r) noexcept;
    static void on_cancel(cancel_hook* c, int err) noexcept;
    // Who may still touch the primitive: k_linked, a wake-up or a cancel may come; k_unlinking,
    // on_cancel is inside unlink() on the task's vCPU; k_done, woken or unlinked, it is left
    // alone from then on.
    enum : uint8_t { k_linked, k_unlinking, k_done };
    std::atomic<uint8_t> state_{k_linked};
    duration timeout_;
    bool waker_waits_;
    std::coroutine_handle<> h_;
    void* sched_ = nullptr;
    task_detail::task_ctx* ctx_ = nullptr;
    vcpu_call wake_;
    vcpu_timer timer_;
};

}  // namespace sync_detail

/// A mutex held by a task; unlocks when destroyed.
class [[nodiscard]] task_lock {
public:
    task_lock() noexcept = default;
    task_lock(mutex& m, uintptr_t owner) noexcept : m_(&m), owner_(owner) {}
    task_lock(task_lock&& o) noexcept : m_(std::exchange(o.m_, nullptr)), owner_(o.owner_) {}
    task_lock& operator=(task_lock&& o) noexcept {
        if (this != &o) {
            unlock();
            m_ = std::exchange(o.m_, nullptr);
            owner_ = o.owner_;
        }
        return *this;
    }
    ~task_lock() { unlock(); }
    void unlock() noexcept {
        if (m_) std::exchange(m_, nullptr)->unlock(owner_);
    }
    bool owns_lock() const noexcept { return m_ != nullptr; }

private:
    mutex* m_ = nullptr;
    uintptr_t owner_ = 0;
};

class [[nodiscard]] lock_awaitable : sync_detail::wait_base {
public:
    lock_awaitable(mutex& m, duration timeout) noexcept : wait_base(timeout), m_(m) {}
    bool await_ready() const noexcept { return false; }
    template <typename P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
        owner_ = reinterpret_cast<uintptr_t>(h.address());
        return prepare(h, task_detail::ctx_of(h)) && linked(m_.lock_async(w_, owner_));
    }
    result<task_lock> await_resume() noexcept {
        if (long r = finish(); r < 0) return errno_error(static_cast<int>(-r));
        return task_lock(m_, owner_);
    }

private:
    bool unlink() noexcept override { return m_.cancel(w_); }
    mutex& m_;
    uintptr_t owner_ = 0;
};

/// Errors: ETIMEDOUT, ECANCELED.
inline lock_awaitable lock(mutex& m, duration timeout = forever) noexcept { return {m, timeout}; }

/// Waits on an event, takes a semaphore's permit, or joins a fiber. Errors: ETIMEDOUT,
/// ECANCELED (for join: EINVAL if the fiber is not joinable).
template <typename Prim>
class [[nodiscard]] simple_wait : sync_detail::wait_base {
public:
    simple_wait(Prim& p, duration timeout) noexcept
        : wait_base(timeout, !std::is_same_v<Prim, fiber>), p_(p) {}
    bool await_ready() const noexcept { return false; }
    template <typename P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
        if (!prepare(h, task_detail::ctx_of(h))) return false;
        if constexpr (std::is_same_v<Prim, event>)
            return linked(p_.wait_async(w_));
        else if constexpr (std::is_same_v<Prim, fiber>)
            return joining_ = linked(p_.join_async(w_));
        else
            return linked(p_.acquire_async(w_));
    }
    result<void> await_resume() noexcept {
        const long r = finish();
        // The fiber was kept for a cancel_join until now (finish() ended the last chance of one):
        // its end may have woken us on the way to a timeout or cancel that then looked at it.
        if constexpr (std::is_same_v<Prim, fiber>)
            if (joining_) fiber::end_join(w_);
        return void_from_syscall(r);
    }

private:
    bool unlink() noexcept override {
        if constexpr (std::is_same_v<Prim, fiber>)
            return fiber::cancel_join(w_, p_);
        else
            return p_.cancel(w_);
    }
    Prim& p_;
    bool joining_ = false;  // a join_async is linked (fiber only)
};

inline simple_wait<event> wait(event& e, duration timeout = forever) noexcept { return {e, timeout}; }
inline simple_wait<counting_semaphore> acquire(counting_semaphore& s, duration timeout = forever) noexcept {
    return {s, timeout};
}
/// The fiber ends, and the handle is then empty; after a timeout or cancellation it is
/// joinable again.
inline simple_wait<fiber> join(fiber& f, duration timeout = forever) noexcept { return {f, timeout}; }

template <typename T>
class [[nodiscard]] send_awaitable : sync_detail::wait_base {
public:
    send_awaitable(channel<T>& c, T v, duration timeout) : wait_base(timeout), c_(c), v_(std::move(v)) {}
    bool await_ready() const noexcept { return false; }
    template <typename P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
        return prepare(h, task_detail::ctx_of(h)) && linked(c_.send_async(w_, v_));
    }
    result<void> await_resume() noexcept { return void_from_syscall(finish()); }

private:
    bool unlink() noexcept override { return c_.cancel(w_); }
    channel<T>& c_;
    T v_;
};

template <typename T>
class [[nodiscard]] recv_awaitable : sync_detail::wait_base {
public:
    recv_awaitable(channel<T>& c, duration timeout) noexcept : wait_base(timeout), c_(c) {}
    bool await_ready() const noexcept { return false; }
    template <typename P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
        return prepare(h, task_detail::ctx_of(h)) && linked(c_.recv_async(w_, slot_));
    }
    result<T> await_resume() noexcept {
        if (long r = finish(); r < 0) return errno_error(static_cast<int>(-r));
        return std::move(*slot_);
    }

private:
    bool unlink() noexcept override { return c_.cancel(w_); }
    channel<T>& c_;
    std::optional<T> slot_;
};

/// Errors: EPIPE (closed), ETIMEDOUT, ECANCELED (the value was not sent).
template <typename T>
send_awaitable<T> send(channel<T>& c, T v, duration timeout = forever) {
    return {c, std::move(v), timeout};
}
/// Errors: ENODATA (closed and drained), ETIMEDOUT, ECANCELED.
template <typename T>
recv_awaitable<T> recv(channel<T>& c, duration timeout = forever) noexcept {
    return {c, timeout};
}

/// Runs fn() in a new fiber on the calling vCPU and suspends the task until it returns: the
/// way for a task to make a blocking fiber call (a file engine without native asynchronous
/// I/O, a library written for fibers) without stalling the vCPU's other tasks. Cancelling the
/// task, or the timeout, interrupts the fiber (its blocking call returns ECANCELED) and still
/// waits for it, so whatever fn writes is written before the await returns. After the
/// timeout the await gives ETIMEDOUT where fn gave ECANCELED, and for an fn that returns
/// void or a plain value (which cannot say whether the interrupt cut it short); a result fn
/// returned with a value or another error is passed on.
/// Errors: those of spawn (ENOMEM, EPERM), ETIMEDOUT; fn's own go in its value.
/// (A result<U> from fn is passed on as it is, not nested.)
template <typename F, typename R = std::invoke_result_t<F&>>
task<typename detail::run_result<R>::type> in_fiber(F fn, duration timeout = forever);

namespace sync_detail {

/// Waits for a helper fiber's `done` event; a cancellation or timeout interrupts the fiber
/// instead of leaving, so the wait always lasts until the fiber's work is over.
class [[nodiscard]] fiber_call_wait : wait_base {
public:
    fiber_call_wait(fiber& f, event& done, duration timeout) noexcept : wait_base(timeout), f_(f), done_(done) {}
    bool await_ready() const noexcept { return false; }
    template <typename P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
        // A task cancelled already interrupts the fiber at once, and still waits for it.
        task_detail::task_ctx* ctx = task_detail::ctx_of(h);
        const bool cancelled = ctx && ctx->cancelled;
        if (cancelled) (void)f_.interrupt();
        (void)prepare(h, cancelled ? nullptr : ctx);
        return linked(done_.wait_async(w_));
    }
    /// What interrupted the fiber: 0 (nothing), ETIMEDOUT or ECANCELED (not set for a task
    /// cancelled before the wait began).
    int await_resume() noexcept {
        (void)finish();
        return cancel_err_;
    }

private:
    bool unlink() noexcept override {
        (void)f_.interrupt();
        return false;  // keep waiting: the fiber ends soon
    }
    fiber& f_;
    event& done_;
};

// The fiber's last use of the task's frame is done.set(); it then only ends, so it is detached.
// *why: what interrupted it (see fiber_call_wait::await_resume).
template <typename F>
task<result<void>> run_fiber_call(F& body, duration timeout, int* why) {
    event done;
    auto f = spawn([&body, &done] {
        body();
        done.set();
    });
    if (!f) co_return unexpected(f.error());
    *why = co_await fiber_call_wait(*f, done, timeout);
    (void)f->detach();
    co_return result<void>{};
}

template <typename T>
struct is_result : std::false_type {};
template <typename T>
struct is_result<result<T>> : std::true_type {};

}  // namespace sync_detail

template <typename F, typename R>
task<typename detail::run_result<R>::type> in_fiber(F fn, duration timeout) {
    // The timeout ends the wait as every other wait's does (ETIMEDOUT), where what fn gave is
    // only the interrupt's ECANCELED, or nothing that would say it was cut short.
    int why = 0;
    if constexpr (std::is_void_v<R>) {
        auto r = co_await sync_detail::run_fiber_call(fn, timeout, &why);
        if (r && why == ETIMEDOUT) co_return errno_error(ETIMEDOUT);
        co_return r;
    } else {
        std::optional<R> out;
        auto body = [&out, &fn] { out.emplace(fn()); };
        auto r = co_await sync_detail::run_fiber_call(body, timeout, &why);
        if (!r) co_return unexpected(r.error());
        if (why == ETIMEDOUT) {
            if constexpr (!sync_detail::is_result<R>::value)
                co_return errno_error(ETIMEDOUT);
            else if (!*out && out->error() == std::errc::operation_canceled)
                co_return errno_error(ETIMEDOUT);
        }
        co_return std::move(*out);
    }
}

}  // namespace gluon::co
