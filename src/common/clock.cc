#include "gluon/common/clock.h"

#include <atomic>

namespace gluon {

namespace {
// 0 until first asked; threads that race both compute the same value (lazy.h says why not a
// function-local static).
constinit std::atomic<int64_t> g_lag{0};
}  // namespace

int64_t coarse_lag_ns() noexcept {
    int64_t lag = g_lag.load(std::memory_order_relaxed);
    if (lag == 0) [[unlikely]] {
        timespec res{};
        if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) != 0 || (res.tv_sec == 0 && res.tv_nsec == 0))
            lag = 20'000'000;  // HZ=100's tick, twice
        else
            lag = 2 * (res.tv_sec * 1'000'000'000LL + res.tv_nsec);
        g_lag.store(lag, std::memory_order_relaxed);
    }
    return lag;
}

}  // namespace gluon
