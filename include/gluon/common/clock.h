// Time vocabulary: absolute deadlines as CLOCK_MONOTONIC nanoseconds, timeouts as std::chrono.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>
#include <type_traits>

namespace gluon {

/// A timeout; `forever` means "no timeout".
using duration = std::chrono::nanoseconds;
inline constexpr duration forever = duration::max();

/// Absolute CLOCK_MONOTONIC time in ns; k_no_deadline means none.
using deadline_t = int64_t;
inline constexpr deadline_t k_no_deadline = INT64_MAX;

inline int64_t timespec_ns(const timespec& ts) noexcept { return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec; }

inline int64_t mono_now_ns() noexcept {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return timespec_ns(ts);
}

/// CLOCK_MONOTONIC at the kernel tick's resolution (a few ms), read without the TSC: for ages
/// that need no precision (idle connections, cache freshness). Not for deadlines.
inline int64_t mono_coarse_ns() noexcept {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return timespec_ns(ts);
}

/// Any std::chrono duration as a `duration`, saturating: one longer than nanoseconds hold
/// (milliseconds::max(), a timeout meaning "no timeout") is forever, not an overflow (which
/// wrapped such a timeout into one already past); one further below zero is duration::min().
template <typename Rep, typename Period>
constexpr duration to_duration(const std::chrono::duration<Rep, Period>& d) noexcept {
    if constexpr (std::is_same_v<std::chrono::duration<Rep, Period>, duration>) {
        return d;
    } else {
        using wide = std::chrono::duration<long double, std::nano>;  // holds any of them
        const wide w = std::chrono::duration_cast<wide>(d);
        if (w >= wide(static_cast<long double>(forever.count()))) return forever;
        if (w <= wide(static_cast<long double>(duration::min().count()))) return duration::min();
        return std::chrono::duration_cast<duration>(d);
    }
}

/// The deadline `d` from now (saturating; negative durations are "now").
inline deadline_t deadline_after(duration d) noexcept {
    if (d == forever) return k_no_deadline;
    int64_t now = mono_now_ns();
    int64_t ns = d.count() < 0 ? 0 : d.count();
    return ns > k_no_deadline - now ? k_no_deadline : now + ns;
}

/// How far CLOCK_MONOTONIC_COARSE may lag behind CLOCK_MONOTONIC: two of its ticks (its
/// resolution, from clock_getres, is one kernel tick: 4 ms at HZ=250).
int64_t coarse_lag_ns() noexcept;

/// Timeouts of a second or more are read from the coarse clock (timeout_deadline, timeout_left).
inline constexpr duration k_coarse_timeout = std::chrono::seconds(1);

/// A deadline for a timeout: no earlier than `d` from now. A timeout of k_coarse_timeout or more
/// (an I/O timeout bounds a failure; it times no work) is read from the coarse clock, a quarter
/// of mono_now_ns's cost, and may end up to coarse_lag_ns() later; a shorter one is exact.
inline deadline_t timeout_deadline(duration d) noexcept {
    if (d < k_coarse_timeout) return deadline_after(d);
    if (d == forever) return k_no_deadline;
    const int64_t now = mono_coarse_ns() + coarse_lag_ns();
    return d.count() > k_no_deadline - now ? k_no_deadline : now + d.count();
}

/// min(d, time_left(deadline)) for a step of a call bounded by a timeout's deadline: from the
/// coarse clock while more than k_coarse_timeout is left (the step may then end up to
/// coarse_lag_ns() late), exact nearer the deadline.
inline duration timeout_left(duration d, deadline_t deadline) noexcept {
    if (deadline == k_no_deadline) return d;
    const int64_t coarse_left = deadline - mono_coarse_ns();
    if (coarse_left - coarse_lag_ns() >= k_coarse_timeout.count()) return d.count() < coarse_left ? d : duration(coarse_left);
    const int64_t left = deadline - mono_now_ns();
    return left <= 0 ? duration(0) : d.count() < left ? d : duration(left);
}
inline duration timeout_left(deadline_t deadline) noexcept { return timeout_left(forever, deadline); }

/// The time left until deadline d (forever for k_no_deadline, zero once it has passed): for
/// handing what remains of one call's deadline to the calls it makes.
inline duration time_left(deadline_t d) noexcept {
    if (d == k_no_deadline) return forever;
    int64_t left = d - mono_now_ns();
    return duration(left > 0 ? left : 0);
}

/// A timeout on each wait of a transfer instead of on the whole call: a transfer that keeps
/// moving never times out, one that makes no progress for `gap` does. What servers call a send
/// timeout "between two successive writes": a slow but steady client gets a large file. A
/// `deadline`, if set, bounds the whole transfer too (a client call's total timeout).
struct stall_timeout {
    duration gap;
    deadline_t deadline = k_no_deadline;
};

/// The timeouts of the steps of one call bounded by one deadline: the first step gets the whole
/// timeout (the deadline was set a moment ago), later ones what is left. Saves a clock read in
/// the common case of a call done in one step. Made from a stall_timeout, every step gets the
/// whole gap (each step of a transfer either moves bytes or fails), or what is left before its
/// deadline when that is less.
class step_timeouts {
public:
    explicit step_timeouts(duration t) noexcept : t_(t), d_(timeout_deadline(t)) {}
    explicit step_timeouts(stall_timeout s) noexcept : t_(s.gap), d_(s.deadline), stall_(true) {}
    duration next() noexcept {
        if (stall_) return timeout_left(t_, d_);  // (no clock is read without a deadline)
        if (first_) {
            first_ = false;
            return t_;
        }
        return time_left(d_);
    }
    /// The whole call's deadline (a stall timeout's own, k_no_deadline if it has none).
    deadline_t deadline() const noexcept { return d_; }

private:
    duration t_;
    deadline_t d_;
    bool first_ = true;
    bool stall_ = false;
};

/// Converts a std::chrono::steady_clock time point (CLOCK_MONOTONIC on Linux) to a deadline,
/// saturating: time_point<Clock, seconds>::max() is no deadline, as Clock's own max() is.
template <typename Clock, typename Dur>
deadline_t deadline_at(std::chrono::time_point<Clock, Dur> tp) noexcept {
    // tp - now is taken in the finer unit of the two, which tp may not fit in: look first.
    using wide = std::chrono::duration<long double, std::nano>;
    const auto now = Clock::now();
    const wide at = std::chrono::duration_cast<wide>(tp.time_since_epoch());
    const wide left = at - std::chrono::duration_cast<wide>(now.time_since_epoch());
    const wide most(static_cast<long double>(forever.count()));
    if (at >= most || left >= most) return k_no_deadline;
    if (at <= -most || left <= wide(0)) return deadline_after(duration::zero());
    return deadline_after(to_duration(tp - now));
}

}  // namespace gluon
