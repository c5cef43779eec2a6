// std::latch for fibers, over gluon::latch: wait parks the fiber, not the vCPU's thread, so the
// fiber that counts the latch down may be one of the same vCPU. Safe across vCPUs and plain
// threads.
#pragma once

#include <cstddef>
#include <limits>

#include "gluon/runtime/waiter.h"
#include "gluon/sync/semaphore.h"

namespace gluon::std_compat {

class latch {
public:
    static constexpr std::ptrdiff_t max() noexcept {
        return std::numeric_limits<std::ptrdiff_t>::max();
    }

    /// As std's: expected is in [0, max()].
    constexpr explicit latch(std::ptrdiff_t expected) : l_(expected) {}
    latch(const latch&) = delete;
    latch& operator=(const latch&) = delete;

    /// As std's: update is in [0, the count left].
    void count_down(std::ptrdiff_t update = 1) { l_.count_down(update); }
    bool try_wait() const noexcept { return l_.try_wait(); }
    /// As std::latch::wait, not interruptible: an interrupt of the calling fiber stays pending
    /// for its next blocking call, as for thread::join.
    void wait() const {
        bool interrupted = false;
        while (!l_.wait()) interrupted = true;  // without a timeout it ends only for an interrupt
        if (interrupted) restore_interrupt();
    }
    void arrive_and_wait(std::ptrdiff_t update = 1) {
        count_down(update);
        wait();
    }

private:
    mutable gluon::latch l_;  // std's wait is const
};

}  // namespace gluon::std_compat
