// Time vocabulary: absolute deadlines as CLOCK_MONOTONIC nanoseconds, timeouts as std::chrono.
#pragma once

#include <time.h>

#include <chrono>
#include <cstdint>

namespace gluon {

/// A timeout; `forever` means "no timeout".
using duration = std::chrono::nanoseconds;
inline constexpr duration forever = duration::max();

/// Absolute CLOCK_MONOTONIC time in ns; k_no_deadline means none.
using deadline_t = int64_t;
inline constexpr deadline_t k_no_deadline = INT64_MAX;

inline int64_t mono_now_ns() noexcept {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

/// CLOCK_MONOTONIC at the kernel tick's resolution (a few ms), read without the TSC: for ages
/// that need no precision (idle connections, cache freshness). Not for deadlines.
inline int64_t mono_coarse_ns() noexcept {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return ts.tv_sec * 1'000'000'000LL + ts.tv_nsec;
}

/// The deadline `d` from now (saturating; negative durations are "now").
inline deadline_t deadline_after(duration d) noexcept {
    if (d == forever) return k_no_deadline;
    int64_t now = mono_now_ns();
    int64_t ns = d.count() < 0 ? 0 : d.count();
    return ns > k_no_deadline - now ? k_no_deadline : now + ns;
}

/// The time left until deadline d (forever for k_no_deadline, zero once it has passed): for
/// handing what remains of one call's deadline to the calls it makes.
inline duration time_left(deadline_t d) noexcept {
    if (d == k_no_deadline) return forever;
    int64_t left = d - mono_now_ns();
    return duration(left > 0 ? left : 0);
}

/// The timeouts of the steps of one call bounded by one deadline: the first step gets the whole
/// timeout (the deadline was set a moment ago), later ones what is left. Saves a clock read in
/// the common case of a call done in one step.
class step_timeouts {
public:
    explicit step_timeouts(duration t) noexcept : t_(t), d_(deadline_after(t)) {}
    duration next() noexcept {
        if (first_) {
            first_ = false;
            return t_;
        }
        return time_left(d_);
    }
    deadline_t deadline() const noexcept { return d_; }

private:
    duration t_;
    deadline_t d_;
    bool first_ = true;
};

/// Converts a std::chrono::steady_clock time point (CLOCK_MONOTONIC on Linux) to a deadline.
template <typename Clock, typename Dur>
deadline_t deadline_at(std::chrono::time_point<Clock, Dur> tp) noexcept {
    auto left = std::chrono::duration_cast<duration>(tp - Clock::now());
    return deadline_after(left);
}

}  // namespace gluon
