// Fibers: stackful coroutines scheduled on the vCPU that created them. Blocking calls made in a
// fiber park only the fiber.
//
// Interruption: fiber::interrupt() makes the fiber's current blocking call (or, if it is not
// blocked, its next one) return ECANCELED. If the call in progress completes before the
// cancellation takes effect, it returns its real result and the interrupt stays pending for the
// next blocking call, so no completed I/O is ever lost.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <tuple>
#include <type_traits>
#include <utility>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/runtime/detail/hot.h"
#include "gluon/runtime/vcpu.h"

namespace gluon {

struct waiter;

struct fiber_options {
    /// Usable stack bytes; 0 = the default (256 KiB, or GLUON_STACK_SIZE in KiB).
    size_t stack_size = 0;
    /// Debug name (truncated to 31 bytes), shown by the gdb script and crash reports.
    const char* name = nullptr;
};

namespace detail {
struct fiber_impl;
/// Creates a fiber with `storage_size` bytes for its callable and queues it to run
/// `invoke(storage)` (which runs, then destroys, the callable); the caller constructs the
/// callable in *storage before anything can run it (before its next switch).
result<fiber_impl*> fiber_create(const fiber_options& opts, size_t storage_size, void** storage,
                                 void (*invoke)(void*));
void fiber_release(fiber_impl* f) noexcept;
uint64_t fiber_id(const fiber_impl* f) noexcept;
}  // namespace detail

class fiber {
public:
    fiber() noexcept = default;
    fiber(fiber&& o) noexcept : f_(std::exchange(o.f_, nullptr)) {}
    fiber& operator=(fiber&& o) noexcept;
    fiber(const fiber&) = delete;
    fiber& operator=(const fiber&) = delete;
    /// A joinable fiber that is destroyed is detached (it keeps running). Inline: a joined or
    /// moved-from handle (the common case) costs a test, not a call.
    ~fiber() {
        if (f_) detail::fiber_release(f_);
    }

    bool joinable() const noexcept { return f_ != nullptr; }
    /// Waits for the fiber to finish; any fiber or thread may. Errors: EINVAL (not joinable:
    /// joined or detached already), EDEADLK (joining itself), ECANCELED (the caller was
    /// interrupted; the fiber stays joinable).
    result<void> join() { return join_for(forever); }
    /// Like join() but gives up at the timeout. Errors: those of join(), ETIMEDOUT (the fiber
    /// stays joinable).
    result<void> join_for(duration timeout);
    /// Lets the fiber run on by itself. Errors: EINVAL (not joinable).
    result<void> detach();
    /// See the header comment. Errors: EINVAL (not joinable).
    result<void> interrupt();
    uint64_t id() const noexcept { return f_ ? detail::fiber_id(f_) : 0; }

    /// join() for code that is not a fiber (a C++20 task): links the continuation waiter `w`,
    /// called with 0 once the fiber has ended. Returns 0 if it has ended already (the handle is
    /// then released, as by join()) or k_waiting: the handle's reference travels with `w` and
    /// this handle is empty. `w` then also holds a reference of its own, kept after the wake-up
    /// until end_join(w): a cancel_join racing with the fiber's end (a timeout, a cancelled
    /// task whose wake-up is still on its way) looks at the fiber, which nothing else may keep.
    /// Errors: -EINVAL (not joinable).
    long join_async(waiter& w) noexcept;
    /// Takes back a join_async whose wake-up has not been claimed: true if `w` will never be
    /// woken, and the handle is then `back` again; false if its continuation runs or has run.
    static bool cancel_join(waiter& w, fiber& back) noexcept;
    /// Drops the reference of a join_async that returned k_waiting, once it is over (woken, or
    /// taken back by cancel_join) and cancel_join will not be called again.
    static void end_join(waiter& w) noexcept;

    explicit fiber(detail::fiber_impl* f) noexcept : f_(f) {}

private:
    detail::fiber_impl* f_ = nullptr;
};

/// Starts fn(args...) in a new fiber on the calling vCPU. The callable and its arguments are
/// stored on the new fiber's stack: no heap allocation. Errors: EPERM (not on a vCPU),
/// ENOMEM (no stack), E2BIG (callable larger than a quarter of the stack), ESHUTDOWN (the vCPU
/// is in the last rounds of fini, see gluon/runtime/vcpu.h).
template <typename F, typename... Args>
result<fiber> spawn(const fiber_options& opts, F&& fn, Args&&... args) {
    using state = std::tuple<std::decay_t<F>, std::decay_t<Args>...>;
    void* storage = nullptr;
    detail::fiber_impl* f = GLUON_TRY(detail::fiber_create(opts, sizeof(state), &storage, [](void* p) {
        auto* s = static_cast<state*>(p);
        std::apply([](auto& fn_, auto&... a) { std::invoke(std::move(fn_), std::move(a)...); }, *s);
        s->~state();
    }));
    new (storage) state(std::forward<F>(fn), std::forward<Args>(args)...);
    return fiber(f);
}

template <typename F, typename... Args>
    requires std::is_invocable_v<std::decay_t<F>, std::decay_t<Args>...>
result<fiber> spawn(F&& fn, Args&&... args) {
    return spawn(fiber_options{}, std::forward<F>(fn), std::forward<Args>(args)...);
}

namespace this_fiber {
/// Lets other ready fibers run. Outside a fiber, yields the OS thread. Inlined: see
/// gluon/runtime/detail/hot.h.
inline void yield() noexcept { detail::yield(); }
/// Sleeps. Errors: ECANCELED (interrupted). Outside a vCPU the OS thread sleeps instead, to
/// the end (it cannot be interrupted).
result<void> sleep_for(duration d) noexcept;
result<void> sleep_until(deadline_t deadline) noexcept;
/// Unique id of the calling fiber (thread-derived id outside a vCPU).
uint64_t id() noexcept;
/// Names the calling fiber (truncated to 31 bytes).
void set_name(const char* name) noexcept;
const char* name() noexcept;
/// Gives back the memory of the calling fiber's stack below its current depth, for a fiber about
/// to wait long (an idle keep-alive connection): a blocked fiber then costs the pages its
/// frames use now. A no-op outside a fiber.
void trim_stack() noexcept;
/// The calling fiber's stack, for code that must know where it is (a thread's attributes,
/// a conservative scanner): {lowest usable address, usable bytes}, the guard page below it
/// excluded. {nullptr, 0} outside a fiber and on a vCPU's own thread stack.
std::pair<void*, size_t> stack() noexcept;
/// True if an interrupt is pending for the calling fiber (does not consume it).
bool interrupt_pending() noexcept;
/// Moves the calling fiber to another vCPU; returns once it runs there. Errors: EINVAL (not on
/// a vCPU, an empty handle, or a vCPU's main fiber, which cannot move).
result<void> migrate_to(vcpu_handle target) noexcept;
}  // namespace this_fiber

}  // namespace gluon
