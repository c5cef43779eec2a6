// vCPU lifecycle: gluon::init() turns the calling OS thread into a vCPU (a scheduler, an event
// engine, timers and a stack cache); gluon::fini() tears it down.
#pragma once

#include <cstddef>
#include <optional>
#include <type_traits>

#include "gluon/common/result.h"
#include "gluon/engine/engine.h"

namespace gluon {

struct init_options {
    /// Force an engine; by default io_uring is probed and epoll is the fallback
    /// (GLUON_ENGINE=epoll|io_uring overrides this too).
    std::optional<engine::kind> engine;
    unsigned queue_depth = 1024;
    /// io_uring: a kernel thread polls the submission queue (IORING_SETUP_SQPOLL), so
    /// submissions cost no syscall while it is awake. It burns a core of its own while busy
    /// and rules out DEFER_TASKRUN; worth it only when a spare core exists.
    bool sqpoll = false;
    /// How many free stacks this vCPU keeps committed for reuse.
    size_t stack_cache = 256;
    /// Before sleeping, an idle vCPU spins this long watching for cross-vCPU wake-ups and
    /// completions (GLUON_IDLE_SPIN_US overrides it; 0 disables). Trades a little idle CPU for
    /// cross-vCPU latency; see ADR 0005.
    unsigned idle_spin_us = 50;
    /// Log the one line that says which engine was chosen and why.
    bool log_engine = true;
};

/// Makes the calling thread a vCPU. Errors: EEXIST (already one), or the engine's setup error.
result<void> init(const init_options& opts = {});

/// Tears down the calling thread's vCPU. Fibers still alive are interrupted (their blocking
/// calls return ECANCELED) and run to completion first, as are fibers and tasks started by work
/// posted to the vCPU meanwhile (calls, runtime::post closures posted before the runtime began
/// to stop), round after round. Work that starts more whenever it runs (a call that posts
/// itself again and starts a fiber) cannot keep the vCPU alive: after 16 rounds it makes no
/// more fibers (spawn fails with ESHUTDOWN), and after 32 fini returns, calls still posted to
/// it then never running. Errors: EPERM (not a vCPU), EDEADLK (called from a fiber other than
/// the one that called init).
result<void> fini();

namespace detail {
template <typename R>
struct run_result {
    using type = result<R>;
};
template <typename T>
struct run_result<result<T>> {
    using type = result<T>;
};
}  // namespace detail

/// Makes the calling thread a vCPU for the length of fn: init(opts), fn() in the vCPU's main
/// fiber, then fini(). Whatever fn creates on its stack (servers, sockets, fiber handles) is
/// destroyed before the vCPU goes, so nothing needs a manual reset() before fini():
///
///     int main() {
///         auto r = gluon::run({}, [] { return serve(); });  // serve() returns result<int>
///         if (!r) std::fprintf(stderr, "%s\n", r.error().message().c_str());
///         return r.value_or(1);
///     }
///
/// Returns fn's value (a result<T> from fn is passed on as it is, not nested).
/// Errors: those of init() and fini(), and fn's own if it returns a result.
template <typename F, typename R = std::invoke_result_t<F>>
typename detail::run_result<R>::type run(const init_options& opts, F&& fn) {
    using out_t = typename detail::run_result<R>::type;
    GLUON_TRY(init(opts));
    out_t out = [&]() -> out_t {
        if constexpr (std::is_void_v<R>) {
            fn();
            return {};
        } else {
            return fn();
        }
    }();
    if (auto f = fini(); !f && out) return unexpected(f.error());
    return out;
}

/// True if the calling thread is a vCPU.
bool is_vcpu() noexcept;

/// The engine of the calling vCPU (nullptr if not a vCPU). For modules built on the engine.
engine::engine* current_engine() noexcept;

/// Index of the calling vCPU in creation order of this process (-1 if not a vCPU).
int current_vcpu_index() noexcept;

namespace detail {
struct vcpu;
vcpu* current_vcpu() noexcept;
}  // namespace detail

/// An opaque handle to a vCPU, for migration and cross-vCPU work.
class vcpu_handle {
public:
    vcpu_handle() = default;
    explicit vcpu_handle(detail::vcpu* v) : v_(v) {}
    static vcpu_handle current() noexcept { return vcpu_handle(detail::current_vcpu()); }
    detail::vcpu* get() const noexcept { return v_; }
    explicit operator bool() const noexcept { return v_ != nullptr; }
    bool operator==(const vcpu_handle&) const = default;

private:
    detail::vcpu* v_ = nullptr;
};

}  // namespace gluon
