// C++20 stackless tasks on gluon's vCPUs. A task<T> is a lazy coroutine: nothing runs until it
// is awaited (co_await t) or spawned (gluon/task/spawn.h). Awaiting a task transfers control to
// it symmetrically and it transfers back when it ends, so chains of awaits use no stack. Its
// value, or the exception that escaped it, is handed to the awaiter (a result<T> is a value
// like any other). Frames come from a per-thread pool (frame_pool.h).
//
// Tasks and fibers share the vCPUs, the engines and the sync primitives: a task awaits I/O
// (gluon/task/io.h), timers, mutexes, events, semaphores and channels (gluon/task/sync.h),
// and fibers; a fiber joins a spawned task. A task must not call a blocking fiber function
// (fd::read_some, mutex::lock): that parks the vCPU's task runner, and every task on the vCPU
// waits with it.
//
// Cancellation: a spawned task has a cancellation scope (task_ctx) shared by the chain of
// tasks it awaits. Cancelling it (a stop_token, join_handle::cancel, a when_any loser) makes
// the operation it is suspended in end with ECANCELED (an engine operation is cancelled in the
// kernel), and every later one fail at once with ECANCELED.
#pragma once

#include <coroutine>
#include <cstdint>
#include <exception>
#include <new>
#include <type_traits>
#include <utility>

#include "gluon/task/frame_pool.h"

namespace gluon {

template <typename T = void>
class task;

namespace task_detail {

/// A cancellable suspension: cancelling its task calls fn(self, err) (on the task's vCPU),
/// which must make the suspension end soon (its result then says why).
struct cancel_hook {
    void (*fn)(cancel_hook* self, int err) noexcept = nullptr;
};

/// The cancellation scope of a spawned task and the chain of tasks it awaits.
struct task_ctx {
    cancel_hook* hook = nullptr;  // the suspension in progress, if it can be cancelled
    int cancelled = 0;            // the errno of the cancellation (ECANCELED); 0: none

    /// Idempotent. Call on the task's vCPU.
    void cancel(int err) noexcept {
        if (cancelled) return;
        cancelled = err;
        if (cancel_hook* h = hook) h->fn(h, err);
    }
};

struct root_base;

// GCC makes a symmetric transfer a tail call only when it optimises and the sanitizers are
// off. Elsewhere (a Debug build, ASan, TSan) every transfer nests a frame, and a loop that
// awaits tasks which end at once (a send that completes at submission) grows the stack by one
// frame per await until it overflows. There, a transfer deep into the stack goes through the
// vCPU's task runner instead, which resumes it on an empty stack.
#if defined(__GNUC__) && !defined(__clang__) && \
    (!defined(__OPTIMIZE__) || defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__))
#define GLUON_TASK_TRANSFER_NESTS 1
#else
#define GLUON_TASK_TRANSFER_NESTS 0
#endif

/// h, or, when the calling task runs deep in its runner's stack, the no-op coroutine after h
/// has been queued on the runner (sched.cc). Only where transfers nest frames.
std::coroutine_handle<> transfer_or_requeue(std::coroutine_handle<> h) noexcept;

inline std::coroutine_handle<> transfer(std::coroutine_handle<> h) noexcept {
#if GLUON_TASK_TRANSFER_NESTS
    return transfer_or_requeue(h);
#else
    return h;
#endif
}
/// A spawned task ended: what its final suspension transfers to (spawn.cc).
std::coroutine_handle<> root_done(root_base* r) noexcept;

struct promise_base {
    std::coroutine_handle<> continuation;
    task_ctx* ctx = nullptr;
    root_base* root = nullptr;  // set when spawned
    // The task this one awaits, while it does: tools/gluon-gdb.py follows these from a spawned
    // task's frame to show the chain of awaiting frames.
    std::coroutine_handle<> awaiting;

    static void* operator new(size_t n) { return frame_alloc(n); }
    static void operator delete(void* p, size_t n) noexcept { frame_free(p, n); }

    std::suspend_always initial_suspend() noexcept { return {}; }
    struct final_awaiter {
        bool await_ready() noexcept { return false; }
        template <typename P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> h) noexcept {
            promise_base& p = h.promise();
            if (p.root) [[unlikely]]
                return root_done(p.root);
            return transfer(p.continuation);
        }
        void await_resume() noexcept {}
    };
    final_awaiter final_suspend() noexcept { return {}; }
};

/// The cancellation scope of the coroutine behind h (nullptr for a coroutine that is not a
/// task: it cannot be cancelled).
template <typename P>
task_ctx* ctx_of(std::coroutine_handle<P> h) noexcept {
    if constexpr (std::is_base_of_v<promise_base, P>)
        return h.promise().ctx;
    else
        return nullptr;
}

template <typename T>
struct value_store {
    enum class state : uint8_t { empty, value, error };
    state st = state::empty;
    union {
        T value;
        std::exception_ptr error;
    };
    value_store() noexcept {}
    value_store(const value_store&) = delete;
    ~value_store() {
        if (st == state::value)
            value.~T();
        else if (st == state::error)
            error.~exception_ptr();
    }
    template <typename U>
    void return_value(U&& v) noexcept(std::is_nothrow_constructible_v<T, U&&>) {
        new (&value) T(std::forward<U>(v));
        st = state::value;
    }
    void unhandled_exception() noexcept {
        new (&error) std::exception_ptr(std::current_exception());
        st = state::error;
    }
    /// The value, or the exception rethrown. Once.
    T take() {
        if (st == state::error) std::rethrow_exception(error);
        return std::move(value);
    }
};

template <>
struct value_store<void> {
    std::exception_ptr error;
    void return_void() noexcept {}
    void unhandled_exception() noexcept { error = std::current_exception(); }
    void take() {
        if (error) std::rethrow_exception(error);
    }
};

template <typename T>
struct promise : promise_base, value_store<T> {
    task<T> get_return_object() noexcept;
    static std::coroutine_handle<promise> handle_type_of(std::coroutine_handle<> h) noexcept {
        return std::coroutine_handle<promise>::from_address(h.address());
    }
};

}  // namespace task_detail

template <typename T>
class [[nodiscard]] task {
public:
    using promise_type = task_detail::promise<T>;
    using handle_type = std::coroutine_handle<promise_type>;
    using value_type = T;

    task() noexcept = default;
    explicit task(handle_type h) noexcept : h_(h) {}
    task(task&& o) noexcept : h_(std::exchange(o.h_, {})) {}
    task& operator=(task&& o) noexcept {
        if (this != &o) {
            if (h_) h_.destroy();
            h_ = std::exchange(o.h_, {});
        }
        return *this;
    }
    task(const task&) = delete;
    task& operator=(const task&) = delete;
    /// A task never awaited is destroyed without running.
    ~task() {
        if (h_) h_.destroy();
    }

    bool valid() const noexcept { return static_cast<bool>(h_); }

    struct awaiter {
        handle_type h;
        task_detail::promise_base* caller_promise = nullptr;
        bool await_ready() const noexcept { return false; }
        template <typename P>
        std::coroutine_handle<> await_suspend(std::coroutine_handle<P> caller) noexcept {
            h.promise().continuation = caller;
            h.promise().ctx = task_detail::ctx_of(caller);
            if constexpr (std::is_base_of_v<task_detail::promise_base, P>) {
                caller_promise = &caller.promise();
                caller_promise->awaiting = h;
            }
            return task_detail::transfer(h);
        }
        T await_resume() {
            if (caller_promise) caller_promise->awaiting = {};
            return h.promise().take();
        }
    };
    /// Runs the task to its end and gives its value (or rethrows its exception). The task is
    /// consumed by the await: co_await it once.
    awaiter operator co_await() && noexcept { return awaiter{h_}; }
    awaiter operator co_await() & noexcept { return awaiter{h_}; }

    /// Gives up ownership of the coroutine (spawn takes it this way).
    handle_type release() noexcept { return std::exchange(h_, {}); }

private:
    handle_type h_;
};

template <typename T>
task<T> task_detail::promise<T>::get_return_object() noexcept {
    return task<T>(task<T>::handle_type::from_promise(*this));
}

}  // namespace gluon
