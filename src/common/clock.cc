#include "gluon/common/clock.h"

namespace gluon {

int64_t coarse_lag_ns() noexcept {
    static const int64_t lag = [] {
        timespec res{};
        if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) != 0 || (res.tv_sec == 0 && res.tv_nsec == 0))
            return int64_t{20'000'000};  // HZ=100's tick, twice
        return int64_t{2 * (res.tv_sec * 1'000'000'000LL + res.tv_nsec)};
    }();
    return lag;
}

}  // namespace gluon
