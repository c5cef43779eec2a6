// std drop-ins for <future>: promise, future, shared_future, packaged_task and async with std's
// semantics and exceptions (std::future_error), whose waits park only the calling fiber. A fiber
// waiting on std::future blocks its vCPU's OS thread, so a promise kept by another fiber of the
// same vCPU is never kept: the vCPU deadlocks. These wait on gluon's waiter, so a fiber of any
// vCPU, or a plain thread, may wait on a future and any of them may keep its promise.
//
// As in std.h, the waits std cannot fail (get, wait, wait_for, wait_until, and the join of an
// async task by the last future's destructor) are not interruptible: an interrupt of the
// waiting fiber (fini, a runtime stopping) stays pending for its next blocking call.
//
// async(launch::async, ...) runs the task in a fiber on the calling vCPU (gluon::spawn);
// launch::deferred runs it in the first get() or wait(); the default policy is launch::async,
// and falls back to deferred when no fiber can be started on a vCPU (no stack, a vCPU in its
// last rounds of fini), as libstdc++ falls back when it cannot start a thread. Left out:
// promise's set_value_at_thread_exit and set_exception_at_thread_exit, packaged_task's
// make_ready_at_thread_exit, the allocator constructors (and uses_allocator), and
// packaged_task's deduction guide for callables other than function pointers.
#pragma once

#include <cerrno>
#include <chrono>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>

#include "gluon/common/clock.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu.h"
#include "gluon/runtime/waiter.h"

namespace gluon::std_compat {

// The vocabulary of <future> is std's own, so `std::` becomes `gluon::std_compat::` here too.
using std::future_errc;
using std::future_error;
using std::future_status;
using std::launch;

template <typename R>
class future;
template <typename R>
class shared_future;

namespace detail {

[[noreturn]] inline void throw_future_error(future_errc e) { throw future_error(e); }

// Where a state keeps its value: a T, a T&'s address, or nothing for void.
template <typename R>
struct value_slot {
    std::optional<R> v;
    template <typename U>
    void put(U&& u) {
        v.emplace(std::forward<U>(u));
    }
    R take() { return std::move(*v); }
    const R& peek() const { return *v; }
};
template <typename R>
struct value_slot<R&> {
    R* p = nullptr;
    void put(R& r) noexcept { p = std::addressof(r); }
    R& take() const noexcept { return *p; }
    R& peek() const noexcept { return *p; }
};
template <>
struct value_slot<void> {
    void put() noexcept {}
    void take() const noexcept {}
    void peek() const noexcept {}
};

// What shared_future::get returns.
template <typename R>
struct shared_get {
    using type = const R&;
};
template <typename R>
struct shared_get<R&> {
    using type = R&;
};
template <>
struct shared_get<void> {
    using type = void;
};

// The shared state of a promise, a packaged_task or an async call and their futures. Kept by
// one side at a time: claim() makes the keeper the only one that may store a result, so the
// value is written outside the lock (its constructor may be long, or throw) and published by
// make_ready() under it.
template <typename R>
class future_state {
public:
    future_state() = default;
    future_state(const future_state&) = delete;
    future_state& operator=(const future_state&) = delete;
    virtual ~future_state() = default;

    /// Reserves the right to store the result. Throws promise_already_satisfied if it is stored
    /// or being stored.
    void claim() {
        lk_.lock();
        const bool taken = ready_ || claimed_;
        claimed_ = true;
        lk_.unlock();
        if (taken) throw_future_error(future_errc::promise_already_satisfied);
    }
    /// Gives the claim back (storing the value threw).
    void unclaim() noexcept {
        lk_.lock();
        claimed_ = false;
        lk_.unlock();
    }
    template <typename... U>
    void put(U&&... u) {
        slot_.put(std::forward<U>(u)...);
    }
    void put_exception(std::exception_ptr e) noexcept { exc_ = std::move(e); }
    /// Publishes what the claimant stored and wakes every waiter.
    void make_ready() noexcept {
        woken_batch b;
        lk_.lock();
        ready_ = true;
        b.take_all(waiters_);
        lk_.unlock();
        b.wake_all(0);
    }
    /// A promise or packaged_task destroyed without a result: broken_promise is its result.
    void abandon() noexcept {
        lk_.lock();
        const bool taken = ready_ || claimed_;
        claimed_ = true;
        lk_.unlock();
        if (taken) return;
        exc_ = std::make_exception_ptr(future_error(future_errc::broken_promise));
        make_ready();
    }
    /// The first get_future(). Throws future_already_retrieved after that.
    void retrieve() {
        lk_.lock();
        const bool again = retrieved_;
        retrieved_ = true;
        lk_.unlock();
        if (again) throw_future_error(future_errc::future_already_retrieved);
    }

    /// Waits until the result is stored, running a deferred task first.
    void wait() {
        if (deferred_) run_deferred_once();
        (void)wait_ready(k_no_deadline);
    }
    template <typename Rep, typename Period>
    future_status wait_for(const std::chrono::duration<Rep, Period>& d) {
        if (deferred_ && !is_ready()) return future_status::deferred;
        const bool ready = wait_ready(deadline_after(to_duration(d)));
        return ready ? future_status::ready : future_status::timeout;
    }
    /// Times out by Clock, as std's: a clock that is not steady may not have reached tp when
    /// CLOCK_MONOTONIC has gone as far as it had left; the wait then goes on.
    template <typename Clock, typename Dur>
    future_status wait_until(const std::chrono::time_point<Clock, Dur>& tp) {
        if (deferred_ && !is_ready()) return future_status::deferred;
        for (;;) {
            if (wait_ready(deadline_at(tp))) return future_status::ready;
            if (Clock::now() >= tp) return future_status::timeout;
        }
    }
    /// The result once ready: the value (moved out), or the stored exception rethrown.
    R take() {
        if (exc_) std::rethrow_exception(exc_);
        return slot_.take();
    }
    typename shared_get<R>::type peek() const {
        if (exc_) std::rethrow_exception(exc_);
        return slot_.peek();
    }

protected:
    /// Makes the state deferred: run_task() runs in the first wait. Before any future exists.
    void defer() noexcept { deferred_ = true; }
    virtual void run_task() noexcept {}

private:
    bool is_ready() noexcept {
        lk_.lock();
        const bool r = ready_;
        lk_.unlock();
        return r;
    }
    // True once ready; false at the deadline. Not interruptible. The lock is taken again after
    // each wake-up, so what the keeper stored before make_ready() is visible on return.
    bool wait_ready(deadline_t deadline) noexcept {
        lk_.lock();
        while (!ready_) {
            waiter w;
            waiters_.push_back(w);
            const long r = park(lk_, w, {.deadline = deadline, .interruptible = false});
            lk_.lock();
            if (r == -ETIMEDOUT) break;
        }
        const bool r = ready_;
        lk_.unlock();
        return r;
    }
    // The first waiter of a deferred state runs the task; the others wait for its result.
    void run_deferred_once() noexcept {
        lk_.lock();
        const bool mine = !started_;
        started_ = true;
        lk_.unlock();
        if (mine) run_task();
    }

    prim_lock lk_;
    waiter_list waiters_;
    bool ready_ = false;
    bool claimed_ = false;
    bool retrieved_ = false;
    bool started_ = false;
    bool deferred_ = false;
    std::exception_ptr exc_;
    value_slot<R> slot_;
};

// The state of an async call: the task (a callable and its arguments, decay-copied) and, for
// launch::async, the fiber running it, which the state's destruction joins: the last future's
// destructor waits for the task as std's does. The fiber holds a plain pointer to the state,
// which that join keeps alive for as long as the fiber runs.
template <typename R, typename Task>
class async_state final : public future_state<R> {
public:
    explicit async_state(Task task) : task_(std::move(task)) {}
    ~async_state() override {
        if (!fiber_.joinable()) return;
        auto r = fiber_.join();
        bool interrupted = false;
        for (; !r && r.error() == std::errc::operation_canceled; r = fiber_.join())
            interrupted = true;  // consumed by the join: given back below
        if (interrupted) restore_interrupt();
    }
    void run_task() noexcept override {
        this->claim();  // cannot throw: nothing else stores this state's result
        auto call = [](auto& f, auto&... a) -> R {
            return std::invoke(std::move(f), std::move(a)...);
        };
        try {
            if constexpr (std::is_void_v<R>)
                std::apply(call, task_);
            else
                this->put(std::apply(call, task_));
        } catch (...) {
            this->put_exception(std::current_exception());
        }
        this->make_ready();
    }
    using future_state<R>::defer;

    fiber fiber_;

private:
    Task task_;
};

// Makes futures of a state (their constructor is private).
struct future_access {
    template <typename R>
    static future<R> make(std::shared_ptr<future_state<R>> s) {
        return future<R>(std::move(s));
    }
};

// What future and shared_future share: the state and the waits.
template <typename R>
class future_base {
public:
    /// False for a default-constructed, moved-from or (future only) consumed future.
    bool valid() const noexcept { return s_ != nullptr; }
    /// Waits for the result (runs a deferred task). Throws future_error(no_state) if !valid().
    void wait() const { state().wait(); }
    /// future_status::ready, timeout, or deferred for a deferred task not yet run. Throws
    /// future_error(no_state) if !valid().
    template <typename Rep, typename Period>
    future_status wait_for(const std::chrono::duration<Rep, Period>& d) const {
        return state().wait_for(d);
    }
    /// As wait_for, up to tp by tp's own clock.
    template <typename Clock, typename Dur>
    future_status wait_until(const std::chrono::time_point<Clock, Dur>& tp) const {
        return state().wait_until(tp);
    }

protected:
    future_base() noexcept = default;
    explicit future_base(std::shared_ptr<future_state<R>> s) noexcept : s_(std::move(s)) {}
    future_state<R>& state() const {
        if (!s_) throw_future_error(future_errc::no_state);
        return *s_;
    }

    std::shared_ptr<future_state<R>> s_;
};

// What promise<R>, promise<R&> and promise<void> share.
template <typename R>
class promise_base {
public:
    promise_base() : s_(std::make_shared<future_state<R>>()) {}
    promise_base(promise_base&& o) noexcept = default;
    promise_base& operator=(promise_base&& o) noexcept {
        promise_base(std::move(o)).swap_base(*this);
        return *this;
    }
    promise_base(const promise_base&) = delete;
    promise_base& operator=(const promise_base&) = delete;
    /// As std: a promise destroyed without a result stores future_error(broken_promise).
    ~promise_base() {
        if (s_) s_->abandon();
    }

    /// Throws future_error: future_already_retrieved (the second call), no_state (moved from).
    future<R> get_future() {
        state().retrieve();
        return future_access::make(s_);
    }
    /// Throws future_error: promise_already_satisfied, no_state.
    void set_exception(std::exception_ptr e) {
        future_state<R>& s = state();
        s.claim();
        s.put_exception(std::move(e));
        s.make_ready();
    }

protected:
    template <typename... U>
    void set(U&&... u) {
        future_state<R>& s = state();
        s.claim();
        try {
            s.put(std::forward<U>(u)...);
        } catch (...) {
            s.unclaim();  // as std: the exception goes to the caller and nothing is stored
            throw;
        }
        s.make_ready();
    }
    void swap_base(promise_base& o) noexcept { s_.swap(o.s_); }
    future_state<R>& state() const {
        if (!s_) throw_future_error(future_errc::no_state);
        return *s_;
    }

private:
    std::shared_ptr<future_state<R>> s_;
};

}  // namespace detail

/// std::future: the one receiver of a result. get() consumes it.
template <typename R>
class future : public detail::future_base<R> {
public:
    future() noexcept = default;
    future(future&&) noexcept = default;
    future& operator=(future&&) noexcept = default;
    future(const future&) = delete;
    future& operator=(const future&) = delete;

    /// Waits, then returns the value (or rethrows the stored exception); valid() is false after,
    /// whichever it was. Throws future_error(no_state) if !valid().
    R get() {
        std::shared_ptr<detail::future_state<R>> s = std::move(this->s_);
        if (!s) detail::throw_future_error(future_errc::no_state);
        s->wait();
        return s->take();
    }
    shared_future<R> share() noexcept { return shared_future<R>(std::move(*this)); }

private:
    friend struct detail::future_access;
    friend class shared_future<R>;
    explicit future(std::shared_ptr<detail::future_state<R>> s) noexcept
        : detail::future_base<R>(std::move(s)) {}
};

/// std::shared_future: copies of it share one result, which get() does not consume.
template <typename R>
class shared_future : public detail::future_base<R> {
public:
    shared_future() noexcept = default;
    shared_future(const shared_future&) noexcept = default;
    shared_future(shared_future&&) noexcept = default;
    shared_future(future<R>&& f) noexcept : detail::future_base<R>(std::move(f.s_)) {}
    shared_future& operator=(const shared_future&) noexcept = default;
    shared_future& operator=(shared_future&&) noexcept = default;

    /// Waits, then returns the value (const T&, T&, or nothing) or rethrows the stored
    /// exception. Throws future_error(no_state) if !valid().
    typename detail::shared_get<R>::type get() const {
        detail::future_state<R>& s = this->state();
        s.wait();
        return s.peek();
    }
};

template <typename R>
class promise : public detail::promise_base<R> {
public:
    /// Throw future_error (promise_already_satisfied, no_state) or what copying v throws.
    void set_value(const R& v) { this->set(v); }
    void set_value(R&& v) { this->set(std::move(v)); }
    void swap(promise& o) noexcept { this->swap_base(o); }
};

template <typename R>
class promise<R&> : public detail::promise_base<R&> {
public:
    /// Throws future_error (promise_already_satisfied, no_state).
    void set_value(R& v) { this->set(v); }
    void swap(promise& o) noexcept { this->swap_base(o); }
};

template <>
class promise<void> : public detail::promise_base<void> {
public:
    /// Throws future_error (promise_already_satisfied, no_state).
    void set_value() { this->set(); }
    void swap(promise& o) noexcept { this->swap_base(o); }
};

template <typename R>
void swap(promise<R>& a, promise<R>& b) noexcept {
    a.swap(b);
}

template <typename Signature>
class packaged_task;

/// std::packaged_task: a callable whose result (or exception) goes to a future.
template <typename R, typename... Args>
class packaged_task<R(Args...)> {
public:
    packaged_task() noexcept = default;
    template <typename F>
        requires(!std::is_same_v<std::remove_cvref_t<F>, packaged_task> &&
                 std::is_invocable_r_v<R, std::decay_t<F>&, Args...>)
    explicit packaged_task(F&& f)
        : fn_(std::make_unique<fn_impl<std::decay_t<F>>>(std::forward<F>(f))),
          s_(std::make_shared<detail::future_state<R>>()) {}
    packaged_task(packaged_task&&) noexcept = default;
    packaged_task& operator=(packaged_task&& o) noexcept {
        packaged_task(std::move(o)).swap(*this);
        return *this;
    }
    packaged_task(const packaged_task&) = delete;
    packaged_task& operator=(const packaged_task&) = delete;
    /// As std: a task destroyed before it ran stores future_error(broken_promise).
    ~packaged_task() {
        if (s_) s_->abandon();
    }

    bool valid() const noexcept { return s_ != nullptr; }
    void swap(packaged_task& o) noexcept {
        fn_.swap(o.fn_);
        s_.swap(o.s_);
    }
    /// Throws future_error: future_already_retrieved (the second call), no_state.
    future<R> get_future() {
        state().retrieve();
        return detail::future_access::make(s_);
    }
    /// Runs the task; its result or exception goes to the future. Throws future_error:
    /// promise_already_satisfied (it ran already), no_state.
    void operator()(Args... args) {
        detail::future_state<R>& s = state();
        s.claim();
        try {
            if constexpr (std::is_void_v<R>) {
                fn_->call(std::forward<Args>(args)...);
            } else {
                s.put(fn_->call(std::forward<Args>(args)...));
            }
        } catch (...) {
            s.put_exception(std::current_exception());
        }
        s.make_ready();
    }
    /// A new state for the same task (the old one, if it has no result, gets broken_promise).
    /// Throws future_error(no_state).
    void reset() {
        state().abandon();
        s_ = std::make_shared<detail::future_state<R>>();
    }

private:
    struct fn_base {
        virtual ~fn_base() = default;
        virtual R call(Args&&... args) = 0;
    };
    template <typename F>
    struct fn_impl final : fn_base {
        template <typename G>
        explicit fn_impl(G&& g) : f(std::forward<G>(g)) {}
        R call(Args&&... args) override {
            if constexpr (std::is_void_v<R>)
                std::invoke(f, std::forward<Args>(args)...);
            else
                return std::invoke(f, std::forward<Args>(args)...);
        }
        F f;
    };
    detail::future_state<R>& state() const {
        if (!s_) detail::throw_future_error(future_errc::no_state);
        return *s_;
    }

    std::unique_ptr<fn_base> fn_;
    std::shared_ptr<detail::future_state<R>> s_;
};

template <typename R, typename... Args>
packaged_task(R (*)(Args...)) -> packaged_task<R(Args...)>;

template <typename Sig>
void swap(packaged_task<Sig>& a, packaged_task<Sig>& b) noexcept {
    a.swap(b);
}

/// std::async. launch::async runs f(args...) in a new fiber on the calling vCPU; the last
/// future of its result joins that fiber when destroyed. launch::deferred runs it in the
/// calling thread at the first get() or wait(). f and args are decay-copied here, as std's.
/// Throws std::system_error when launch::async cannot start a fiber, as std_compat::thread:
/// operation_not_permitted outside a vCPU (whatever the policy); resource_unavailable_try_again
/// otherwise, unless launch::deferred is allowed too (the default policy), which it then is.
template <typename F, typename... Args>
[[nodiscard]] future<std::invoke_result_t<std::decay_t<F>, std::decay_t<Args>...>> async(
    launch policy, F&& f, Args&&... args) {
    using R = std::invoke_result_t<std::decay_t<F>, std::decay_t<Args>...>;
    using task = std::tuple<std::decay_t<F>, std::decay_t<Args>...>;
    auto s = std::make_shared<detail::async_state<R, task>>(
        task(std::forward<F>(f), std::forward<Args>(args)...));
    const bool may_defer = (policy & launch::deferred) == launch::deferred;
    if ((policy & launch::async) == launch::async) {
        auto r = spawn([p = s.get()] { p->run_task(); });
        if (r) {
            s->fiber_ = std::move(*r);
            return detail::future_access::make<R>(std::move(s));
        }
        const bool eperm = r.error() == std::errc::operation_not_permitted;
        if (eperm || !may_defer) {
            auto ec = eperm ? r.error()
                            : std::make_error_code(std::errc::resource_unavailable_try_again);
            throw std::system_error(ec, "gluon::std_compat::async");
        }
    }
    s->defer();  // launch::deferred, or a policy naming neither (as libstdc++)
    return detail::future_access::make<R>(std::move(s));
}

/// async(launch::async | launch::deferred, f, args...).
template <typename F, typename... Args>
    requires(!std::is_same_v<std::decay_t<F>, launch>)
[[nodiscard]] future<std::invoke_result_t<std::decay_t<F>, std::decay_t<Args>...>> async(
    F&& f, Args&&... args) {
    return std_compat::async(launch::async | launch::deferred, std::forward<F>(f),
                             std::forward<Args>(args)...);
}

}  // namespace gluon::std_compat
