// std::jthread for fibers: a std_compat::thread (a fiber on the calling vCPU) with a
// std::stop_source, which asks it to stop and joins it when it is destroyed. std::jthread runs
// an OS thread, and its join held the vCPU's thread. std.h includes this at its end.
#pragma once

#include <stop_token>
#include <type_traits>
#include <utility>

#include "gluon/std_compat/std.h"

namespace gluon::std_compat {

class jthread {
public:
    using id = thread::id;

    /// No thread, and no stop state (get_stop_source().stop_possible() is false).
    jthread() noexcept : ss_(std::nostopstate) {}
    /// Starts f(get_stop_token(), args...) if f takes a std::stop_token first, else
    /// f(args...), in a fiber on the calling vCPU. Throws std::system_error as thread's
    /// constructor does.
    template <typename F, typename... Args>
        requires(!std::is_same_v<std::remove_cvref_t<F>, jthread>)
    explicit jthread(F&& f, Args&&... args)
        : t_(start(ss_, std::forward<F>(f), std::forward<Args>(args)...)) {}
    /// As std::jthread: a joinable thread is asked to stop, then joined (not interruptibly: an
    /// interrupt of the calling fiber stays pending, as for thread::join).
    ~jthread() {
        if (joinable()) {
            request_stop();
            join();
        }
    }
    jthread(const jthread&) = delete;
    jthread& operator=(const jthread&) = delete;
    jthread(jthread&&) noexcept = default;  // the moved-from one has no thread and no stop state
    /// As std's: a joinable thread here is asked to stop and joined first.
    jthread& operator=(jthread&& o) noexcept {
        jthread(std::move(o)).swap(*this);  // the temporary's destructor ends the old one
        return *this;
    }

    void swap(jthread& o) noexcept {
        ss_.swap(o.ss_);
        t_.swap(o.t_);
    }
    friend void swap(jthread& a, jthread& b) noexcept { a.swap(b); }
    bool joinable() const noexcept { return t_.joinable(); }
    /// As thread::join.
    void join() { t_.join(); }
    /// As thread::detach.
    void detach() { t_.detach(); }
    id get_id() const noexcept { return t_.get_id(); }
    std::stop_source get_stop_source() noexcept { return ss_; }
    std::stop_token get_stop_token() const noexcept { return ss_.get_token(); }
    /// True if this call made the request (there is a stop state and none was made before).
    bool request_stop() noexcept { return ss_.request_stop(); }
    static unsigned hardware_concurrency() noexcept { return thread::hardware_concurrency(); }

private:
    template <typename F, typename... Args>
    static thread start(std::stop_source& ss, F&& f, Args&&... args) {
        if constexpr (std::is_invocable_v<std::decay_t<F>, std::stop_token, std::decay_t<Args>...>)
            return thread(std::forward<F>(f), ss.get_token(), std::forward<Args>(args)...);
        else
            return thread(std::forward<F>(f), std::forward<Args>(args)...);
    }

    std::stop_source ss_;  // before t_: the fiber may run (and read its token) once t_ is made
    thread t_;
};

}  // namespace gluon::std_compat
