// std drop-ins: a thread-based program moves onto fibers by changing `std::` to
// `gluon::std_compat::` for thread, the mutex family, condition_variable and this_thread (here),
// call_once, counting_semaphore and binary_semaphore, latch, barrier, jthread, and promise,
// future, shared_future, packaged_task and async (a header each under gluon/std_compat/). Their
// waits park the fiber, not the vCPU's thread, which std's would hold: a fiber waiting for
// another fiber of the same vCPU would wait for ever.
// These mirror std semantics exactly, including exceptions (std::system_error,
// std::future_error) where std throws; they are the one place in gluon that throws. Threads are
// fibers on the calling vCPU, so the program calls gluon::init() once (or runs inside a
// gluon::runtime).
#pragma once

#include <chrono>
#include <cstdint>
#include <exception>
#include <compare>
#include <functional>
#include <ostream>
#include <system_error>
#include <thread>
#include <utility>

#include "gluon/runtime/fiber.h"
#include "gluon/runtime/waiter.h"
#include "gluon/std_compat/future.h"
#include "gluon/std_compat/barrier.h"
#include "gluon/std_compat/call_once.h"
#include "gluon/std_compat/counting_semaphore.h"
#include "gluon/std_compat/latch.h"
#include "gluon/sync/condition_variable.h"
#include "gluon/sync/mutex.h"
#include "gluon/sync/shared_mutex.h"

namespace gluon::std_compat {

using gluon::condition_variable;
using gluon::condition_variable_any;
using gluon::mutex;
using gluon::recursive_mutex;
using gluon::recursive_timed_mutex;
using gluon::shared_mutex;
using gluon::shared_timed_mutex;
using gluon::timed_mutex;

class thread {
public:
    class id {
    public:
        id() noexcept = default;
        explicit id(uint64_t v) noexcept : v_(v) {}
        friend bool operator==(id a, id b) noexcept { return a.v_ == b.v_; }
        friend auto operator<=>(id a, id b) noexcept { return a.v_ <=> b.v_; }
        friend std::ostream& operator<<(std::ostream& os, id i) { return os << i.v_; }
        uint64_t value() const noexcept { return v_; }

    private:
        uint64_t v_ = 0;
    };

    thread() noexcept = default;
    /// Starts f(args...) in a fiber on the calling vCPU. Throws std::system_error
    /// (operation_not_permitted outside a vCPU, resource_unavailable_try_again without a stack).
    template <typename F, typename... Args>
        requires(!std::is_same_v<std::decay_t<F>, thread>)
    explicit thread(F&& f, Args&&... args) {
        auto r = spawn(std::forward<F>(f), std::forward<Args>(args)...);
        if (!r) {
            auto ec = r.error() == std::errc::operation_not_permitted
                          ? r.error()
                          : std::make_error_code(std::errc::resource_unavailable_try_again);
            throw std::system_error(ec, "gluon::std_compat::thread");
        }
        id_ = id(r->id());
        f_ = std::move(*r);
    }
    thread(thread&& o) noexcept : f_(std::move(o.f_)), id_(std::exchange(o.id_, id())) {}
    thread& operator=(thread&& o) noexcept {
        if (joinable()) std::terminate();
        f_ = std::move(o.f_);
        id_ = std::exchange(o.id_, id());
        return *this;
    }
    /// As std::thread: destroying a joinable thread calls std::terminate.
    ~thread() {
        if (joinable()) std::terminate();
    }

    bool joinable() const noexcept { return f_.joinable(); }
    id get_id() const noexcept { return id_; }
    /// As std::thread::join, not interruptible: an interrupt of the calling fiber (fini, a
    /// runtime stopping) stays pending for its next blocking call; the join goes on waiting.
    void join() {
        if (!joinable()) throw std::system_error(std::make_error_code(std::errc::invalid_argument), "join");
        auto r = f_.join();
        bool interrupted = false;
        for (; !r && r.error() == std::errc::operation_canceled; r = f_.join()) interrupted = true;
        if (interrupted) restore_interrupt();
        if (!r) throw std::system_error(r.error(), "join");
        id_ = id();
    }
    void detach() {
        if (!joinable()) throw std::system_error(std::make_error_code(std::errc::invalid_argument), "detach");
        (void)f_.detach();
        id_ = id();
    }
    void swap(thread& o) noexcept {
        std::swap(f_, o.f_);
        std::swap(id_, o.id_);
    }
    static unsigned hardware_concurrency() noexcept { return std::thread::hardware_concurrency(); }

private:
    fiber f_;
    id id_;
};

namespace this_thread {
inline void yield() noexcept { this_fiber::yield(); }
inline thread::id get_id() noexcept { return thread::id(this_fiber::id()); }
/// As std::this_thread::sleep_for, not interruptible: sleeps out the whole time, and an
/// interrupt of the calling fiber (fini, a runtime stopping) stays pending for its next
/// blocking call, as for thread::join.
template <typename Rep, typename Period>
void sleep_for(const std::chrono::duration<Rep, Period>& d) {
    const deadline_t until = deadline_after(to_duration(d));
    bool interrupted = false;
    while (mono_now_ns() < until)
        if (!this_fiber::sleep_until(until)) interrupted = true;  // consumed: give it back below
    if (interrupted) restore_interrupt();
}
/// As sleep_for; returns once Clock::now() has reached tp. A clock that is not steady
/// (system_clock set back, a clock of the program's own) can fall behind CLOCK_MONOTONIC
/// while the fiber sleeps: the sleep then goes on for what that clock says is left.
template <typename Clock, typename Dur>
void sleep_until(const std::chrono::time_point<Clock, Dur>& tp) {
    bool interrupted = false;
    while (Clock::now() < tp) {
        const deadline_t until = deadline_at(tp);
        while (mono_now_ns() < until)
            if (!this_fiber::sleep_until(until)) interrupted = true;
    }
    if (interrupted) restore_interrupt();
}
}  // namespace this_thread

}  // namespace gluon::std_compat

// After thread, which jthread is made of.
#include "gluon/std_compat/jthread.h"
