// Structured concurrency for tasks: when_all, when_any and task_group. Children run on the
// calling vCPU; none outlives the call that started it: every child is awaited before
// when_all / when_any / task_group::join return, so nothing a child writes is written after.
#pragma once

#include <deque>
#include <exception>
#include <optional>
#include <tuple>
#include <utility>
#include <variant>
#include <vector>

#include "gluon/common/result.h"
#include "gluon/sync/semaphore.h"
#include "gluon/task/spawn.h"
#include "gluon/task/sync.h"
#include "gluon/task/task.h"

namespace gluon {

namespace task_detail {
template <typename T>
using or_monostate = std::conditional_t<std::is_void_v<T>, std::monostate, T>;

template <typename T>
task<or_monostate<T>> as_value(task<T> t) {
    if constexpr (std::is_void_v<T>) {
        co_await std::move(t);
        co_return std::monostate{};
    } else {
        co_return co_await std::move(t);
    }
}

template <typename T>
struct any_state {
    event first;
    std::optional<size_t> winner;
    std::optional<T> value;
    std::exception_ptr error;
};

template <typename T>
task<void> any_child(task<T> t, any_state<or_monostate<T>>* st, size_t index) {
    try {
        auto v = co_await as_value(std::move(t));
        if (!st->winner) {
            st->winner = index;
            st->value.emplace(std::move(v));
            st->first.set();
        }
    } catch (...) {
        if (!st->winner) {
            st->winner = index;
            st->error = std::current_exception();
            st->first.set();
        }
    }
}
/// Awaits `body`, a loop that joins a set of children one after another, so that cancelling
/// the awaiting task cancels the whole set at once (cancel_set()). A join passes a cancel on
/// only to the child it awaits: the others were cancelled one by one as the loop reached them,
/// each once the one before had wound down, and the caller's cancellation took the sum of
/// their wind-downs instead of the longest. The loop runs in a cancellation scope of its own,
/// cancelled with the caller's, so a child it reaches later (one spawned into a task_group
/// meanwhile) is cancelled as it is joined.
template <typename F>
class [[nodiscard]] join_set_awaiter : cancel_hook {
public:
    join_set_awaiter(task<void> body, F cancel_set) noexcept
        : body_(body.release()), cancel_set_(std::move(cancel_set)) {}
    join_set_awaiter(const join_set_awaiter&) = delete;
    join_set_awaiter& operator=(const join_set_awaiter&) = delete;
    ~join_set_awaiter() {
        if (body_) body_.destroy();
    }
    bool await_ready() const noexcept { return false; }
    template <typename P>
    std::coroutine_handle<> await_suspend(std::coroutine_handle<P> caller) noexcept {
        body_.promise().continuation = caller;
        body_.promise().ctx = &own_;
        if constexpr (std::is_base_of_v<promise_base, P>) {
            caller_promise_ = &caller.promise();
            caller_promise_->awaiting = body_;
        }
        ctx_ = ctx_of(caller);
        if (ctx_) {
            fn = [](cancel_hook* c, int err) noexcept {
                auto* self = static_cast<join_set_awaiter*>(c);
                self->cancel_set_();
                self->own_.cancel(err);
            };
            ctx_->hook = this;
            if (ctx_->cancelled) fn(this, ctx_->cancelled);  // cancelled before the joins began
        }
        return transfer(body_);
    }
    void await_resume() {
        if (ctx_) ctx_->hook = nullptr;
        if (caller_promise_) caller_promise_->awaiting = {};
        body_.promise().take();
    }

private:
    task<void>::handle_type body_;
    F cancel_set_;
    task_ctx own_;
    task_ctx* ctx_ = nullptr;
    promise_base* caller_promise_ = nullptr;
};

template <typename F>
join_set_awaiter<F> join_set(task<void> body, F cancel_set) noexcept {
    return {std::move(body), std::move(cancel_set)};
}
}  // namespace task_detail

/// Runs every task concurrently on the calling vCPU and gives all their values (void ones as
/// std::monostate), in order. If some throw, the others are still awaited, and the first
/// exception (in argument order) is rethrown. Cancelling the caller cancels them all at once
/// (their wind-downs overlap), and still awaits them.
/// Errors: spawning fails only off a vCPU (EPERM), which a running task never is.
template <typename... T>
task<std::tuple<task_detail::or_monostate<T>...>> when_all(task<T>... ts) {
    std::tuple<join_handle<task_detail::or_monostate<T>>...> hs{
        co_spawn(task_detail::as_value(std::move(ts))).value()...};
    std::tuple<std::optional<task_detail::or_monostate<T>>...> out;
    std::exception_ptr first;
    auto await_one = [&]<size_t I>(std::integral_constant<size_t, I>) -> task<void> {
        try {
            std::get<I>(out).emplace(co_await std::get<I>(hs));
        } catch (...) {
            if (!first) first = std::current_exception();
        }
    };
    co_await task_detail::join_set(
        [&]<size_t... I>(std::index_sequence<I...>) -> task<void> {
            (co_await await_one(std::integral_constant<size_t, I>{}), ...);
        }(std::index_sequence_for<T...>{}),
        [&]() noexcept { std::apply([](auto&... h) { (h.cancel(), ...); }, hs); });
    if (first) std::rethrow_exception(first);
    co_return std::apply([](auto&... o) { return std::tuple<task_detail::or_monostate<T>...>{std::move(*o)...}; },
                         out);
}

/// when_all over a vector of tasks of one type.
template <typename T>
task<std::vector<task_detail::or_monostate<T>>> when_all(std::vector<task<T>> ts) {
    std::vector<join_handle<task_detail::or_monostate<T>>> hs;
    hs.reserve(ts.size());
    for (auto& t : ts) hs.push_back(co_spawn(task_detail::as_value(std::move(t))).value());
    std::vector<task_detail::or_monostate<T>> out;
    out.reserve(hs.size());
    std::exception_ptr first;
    co_await task_detail::join_set(
        [&]() -> task<void> {
            for (auto& h : hs) {
                try {
                    out.push_back(co_await h);
                } catch (...) {
                    if (!first) first = std::current_exception();
                }
            }
        }(),
        [&]() noexcept {
            for (auto& h : hs) h.cancel();
        });
    if (first) std::rethrow_exception(first);
    co_return out;
}

/// Runs the tasks concurrently and gives the index and value of the first to end; the others
/// are cancelled and awaited before it returns (their results are dropped). If the first to
/// end threw, its exception is rethrown. Errors: ECANCELED (the caller was cancelled before
/// any ended; all were cancelled and awaited), EINVAL (no task: none would ever end).
template <typename T>
task<result<std::pair<size_t, task_detail::or_monostate<T>>>> when_any(std::vector<task<T>> ts) {
    if (ts.empty()) co_return errno_error(EINVAL);
    task_detail::any_state<task_detail::or_monostate<T>> st;
    std::vector<join_handle<void>> hs;
    hs.reserve(ts.size());
    for (size_t i = 0; i < ts.size(); ++i) hs.push_back(co_spawn(task_detail::any_child(std::move(ts[i]), &st, i)).value());
    auto w = co_await co::wait(st.first);
    for (auto& h : hs) h.cancel();
    for (auto& h : hs) co_await h;  // any_child never throws
    if (!w && !st.winner) co_return unexpected(w.error());
    if (st.error) std::rethrow_exception(st.error);
    co_return std::pair<size_t, task_detail::or_monostate<T>>{*st.winner, std::move(*st.value)};
}

template <typename T, typename... More>
    requires(std::is_same_v<task<T>, More> && ...)
task<result<std::pair<size_t, task_detail::or_monostate<T>>>> when_any(task<T> first, More... more) {
    std::vector<task<T>> ts;
    ts.push_back(std::move(first));
    (ts.push_back(std::move(more)), ...);
    return when_any(std::move(ts));
}

/// A scope of child tasks on the calling vCPU: spawn() starts one, join() awaits them all (and
/// must be awaited before the group is destroyed), cancel() cancels those still running.
/// A child may spawn more children into its group while join() waits: join() awaits them too.
/// Values are dropped; the first exception a child throws is rethrown by join().
class task_group {
public:
    task_group() = default;
    task_group(const task_group&) = delete;
    task_group& operator=(const task_group&) = delete;
    /// Destroying a group whose children were not joined detaches them (they run on).
    ~task_group() = default;

    /// Errors: EPERM (not on a vCPU).
    template <typename T>
    result<void> spawn(task<T> t) {
        auto h = GLUON_TRY(co_spawn(drop(std::move(t))));
        children_.push_back(std::move(h));
        return {};
    }
    /// Cancels every child still running (they still have to be joined).
    void cancel() noexcept {
        for (auto& h : children_) h.cancel();
    }
    size_t size() const noexcept { return children_.size(); }
    /// Awaits every child; cancelling the awaiting task cancels them all at once (their
    /// wind-downs overlap), and those spawned after as join() reaches them.
    task<void> join() {
        std::exception_ptr first;
        co_await task_detail::join_set(
            [&]() -> task<void> {
                // By index: a child may spawn into the group while this waits, and its handle
                // is awaited too. (The deque keeps the awaited handle in place as it grows.)
                for (size_t i = 0; i < children_.size(); ++i) {
                    try {
                        co_await children_[i];
                    } catch (...) {
                        if (!first) first = std::current_exception();
                    }
                }
            }(),
            [this]() noexcept { cancel(); });
        children_.clear();
        if (first) std::rethrow_exception(first);
    }

private:
    template <typename T>
    static task<void> drop(task<T> t) {
        (void)co_await std::move(t);
    }
    std::deque<join_handle<void>> children_;
};

}  // namespace gluon
