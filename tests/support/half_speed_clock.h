// A clock that is not steady and runs at half the speed of steady_clock: what a wait sees of
// system_clock when the wall clock is set back while it waits. For the calls that take a time
// point of any clock and must end by that clock, not by CLOCK_MONOTONIC.
#pragma once

#include <chrono>
#include <cstdint>

namespace gluon::test {

struct half_speed_clock {
    using rep = int64_t;
    using period = std::nano;
    using duration = std::chrono::nanoseconds;
    using time_point = std::chrono::time_point<half_speed_clock>;
    static constexpr bool is_steady = false;
    static time_point now() noexcept {
        return time_point(std::chrono::steady_clock::now().time_since_epoch() / 2);
    }
};

}  // namespace gluon::test
