// A test-and-test-and-set spinlock for critical sections of a few instructions (wait lists of the
// sync primitives). Never held across a fiber switch or a syscall.
#pragma once

#include <atomic>

namespace gluon {

class spinlock {
public:
    void lock() noexcept {
        for (;;) {
            if (!flag_.exchange(true, std::memory_order_acquire)) return;
            while (flag_.load(std::memory_order_relaxed)) __builtin_ia32_pause();
        }
    }
    bool try_lock() noexcept {
        return !flag_.load(std::memory_order_relaxed) &&
               !flag_.exchange(true, std::memory_order_acquire);
    }
    void unlock() noexcept { flag_.store(false, std::memory_order_release); }

private:
    std::atomic<bool> flag_{false};
};

}  // namespace gluon
