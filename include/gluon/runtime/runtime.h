// A runtime: N vCPUs, each an OS thread (optionally pinned to a core) running its own scheduler
// and engine. Work reaches a vCPU only through explicit posts; vCPUs share nothing else.
#pragma once

#include <atomic>
#include <functional>
#include <optional>
#include <memory>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "gluon/common/result.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu.h"

namespace gluon {

struct runtime_options {
    unsigned vcpus = 0;  // 0 = one per online CPU
    bool pin = true;     // pin vCPU i to CPU (i % online CPUs)
    init_options vcpu;
};

class runtime {
public:
    /// Starts the vCPUs; returns once all are up. Errors: the first vCPU's init error.
    static result<std::unique_ptr<runtime>> start(const runtime_options& opts = {});
    /// Stops every vCPU (their fibers are interrupted and finish) and joins the threads.
    ~runtime();
    runtime(const runtime&) = delete;
    runtime& operator=(const runtime&) = delete;

    unsigned size() const noexcept { return static_cast<unsigned>(vcpus_.size()); }
    vcpu_handle vcpu(unsigned i) const noexcept;

    /// Runs fn in a new fiber on vCPU i, without waiting. Errors: EINVAL (no such vCPU),
    /// ESHUTDOWN (the runtime is being destroyed: fn is dropped). Any thread or fiber may post,
    /// also a fiber of the runtime while it stops.
    result<void> post(unsigned i, std::function<void()> fn);
    /// post() with options for the new fiber (its stack size; a name, which must outlive the
    /// fiber). Errors: as post().
    result<void> post(unsigned i, const fiber_options& opts, std::function<void()> fn);
    /// Runs fn in a new fiber on vCPU i and parks the caller (fiber or thread) until it ends.
    /// Errors: as post(); ENOMEM (the fiber could not be made: no stack for it; fn is dropped
    /// without running).
    result<void> run(unsigned i, std::function<void()> fn);
    /// run() with options for the new fiber, as post(). Errors: as run().
    result<void> run(unsigned i, const fiber_options& opts, std::function<void()> fn);
    /// run() that carries fn's return value back. Errors: as run().
    template <typename F, typename R = std::invoke_result_t<F>>
        requires(!std::is_void_v<R>)
    result<R> call(unsigned i, F&& fn) {
        std::optional<R> out;
        GLUON_TRY(run(i, [&] { out.emplace(fn()); }));
        return std::move(*out);
    }

    struct vcpu_slot;

private:
    runtime() = default;
    std::vector<std::unique_ptr<vcpu_slot>> vcpus_;
};

/// Runs closures on the vCPUs of a runtime it owns, round-robin.
class work_pool {
public:
    /// Errors: those of runtime::start.
    static result<std::unique_ptr<work_pool>> create(unsigned vcpus, bool pin = false);
    /// Fire and forget. Errors: ESHUTDOWN (the pool is being destroyed: fn is dropped).
    result<void> async(std::function<void()> fn);
    /// Runs fn on the next vCPU and waits for it. Errors: as async().
    result<void> call(std::function<void()> fn);
    unsigned size() const noexcept { return rt_->size(); }
    runtime& rt() noexcept { return *rt_; }

private:
    explicit work_pool(std::unique_ptr<runtime> rt) : rt_(std::move(rt)) {}
    unsigned next() noexcept { return next_.fetch_add(1, std::memory_order_relaxed) % rt_->size(); }
    std::unique_ptr<runtime> rt_;
    std::atomic<unsigned> next_{0};
};

/// Runs fn on a pool of plain OS threads (for calls that cannot be made asynchronous:
/// getaddrinfo, some filesystem calls) and parks the calling fiber until it returns. Outside a
/// vCPU fn simply runs inline. fn must not use fiber APIs. The pool keeps 4 threads and adds
/// one whenever a job finds none idle, up to GLUON_OFFLOAD_THREADS (default 64), so slow calls
/// of one kind do not hold up the others; extra threads leave after 10 s without work. When the
/// pool has no thread and cannot start one (a thread or memory limit), fn runs inline, the
/// vCPU blocked meanwhile; when it has threads but cannot start another, fn waits for one.
void offload(const std::function<void()>& fn);
/// Runs fn on the offload pool without waiting for it, from any thread (also outside a vCPU): for
/// work whose caller may stop waiting (a timeout, an interrupt) while it goes on. fn owns
/// everything it touches, since the caller may be gone when it runs; it must not use fiber
/// APIs. Jobs still queued when the process exits run before the pool's threads are joined.
/// Without a thread to be had it runs inline, as offload's fn.
void offload_detached(std::function<void()> fn);
template <typename F, typename R = std::invoke_result_t<F>>
    requires(!std::is_void_v<R>)
R offload_call(F&& fn) {
    std::optional<R> out;
    offload([&] { out.emplace(fn()); });
    return std::move(*out);
}

}  // namespace gluon
