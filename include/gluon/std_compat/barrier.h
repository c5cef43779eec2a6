// std::barrier for fibers, over gluon::mutex and gluon::condition_variable: a wait parks the
// fiber, not the vCPU's thread, so the fibers that complete the phase may be ones of the same
// vCPU. Safe across vCPUs and plain threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <mutex>
#include <type_traits>
#include <utility>

#include "gluon/sync/condition_variable.h"
#include "gluon/sync/mutex.h"

namespace gluon::std_compat {

namespace detail {
struct no_completion {
    void operator()() noexcept {}
};
}  // namespace detail

template <typename CompletionFunction = detail::no_completion>
class barrier {
    static_assert(std::is_nothrow_invocable_v<CompletionFunction&>,
                  "barrier's completion function must be invocable without arguments, noexcept");

public:
    /// What arrive returns and wait takes: the phase it arrived in.
    class arrival_token {
    private:
        friend barrier;
        explicit arrival_token(uint64_t phase) noexcept : phase_(phase) {}
        uint64_t phase_;
    };

    static constexpr std::ptrdiff_t max() noexcept {
        return std::numeric_limits<std::ptrdiff_t>::max();
    }

    /// As std's: expected is in [0, max()]; f runs once per phase, when its last arrival comes.
    constexpr explicit barrier(std::ptrdiff_t expected, CompletionFunction f = CompletionFunction())
        : expected_(expected), left_(expected), completion_(std::move(f)) {}
    barrier(const barrier&) = delete;
    barrier& operator=(const barrier&) = delete;

    /// Counts update arrivals in the current phase (as std's: no more than it has left); the last
    /// runs the completion function and starts the next phase, unblocking the phase's waiters.
    [[nodiscard]] arrival_token arrive(std::ptrdiff_t update = 1) {
        std::lock_guard g(m_);
        const arrival_token t(phase_);
        left_ -= update;
        if (left_ == 0) complete_phase();
        return t;
    }
    /// Waits for the end of the phase of `arrival` (the current phase or the one before). Not
    /// interruptible, as std's: an interrupt of the calling fiber stays pending for its next
    /// blocking call (mutex::lock and condition_variable::wait leave it so).
    void wait(arrival_token&& arrival) const {
        std::unique_lock lk(m_);
        cv_.wait(lk, [&] { return phase_ != arrival.phase_; });
    }
    void arrive_and_wait() { wait(arrive()); }
    /// Leaves the barrier: one arrival fewer expected in the phases after this one, and one
    /// arrival in this one.
    void arrive_and_drop() {
        std::lock_guard g(m_);
        --expected_;
        if (--left_ == 0) complete_phase();
    }

private:
    // m_ held. The completion function runs under it: no arrival can want it before the phase
    // ends (the phase has all of its arrivals), and waiters see the new phase only after it.
    void complete_phase() {
        completion_();
        left_ = expected_;
        ++phase_;
        cv_.notify_all();
    }

    mutable mutex m_;
    mutable condition_variable cv_;
    std::ptrdiff_t expected_;  // arrivals of each phase from the next one on
    std::ptrdiff_t left_;      // arrivals the current phase waits for
    uint64_t phase_ = 0;
    [[no_unique_address]] CompletionFunction completion_;
};

}  // namespace gluon::std_compat
