// std::once_flag and std::call_once for fibers: a caller that finds the callable running parks
// its fiber, not the vCPU's thread, so the callable may park too (I/O, a sleep) while another
// fiber of the same vCPU calls call_once. Safe across vCPUs and plain threads.
#pragma once

#include <atomic>
#include <functional>
#include <mutex>
#include <utility>

#include "gluon/sync/mutex.h"

namespace gluon::std_compat {

class once_flag {
public:
    constexpr once_flag() noexcept = default;
    once_flag(const once_flag&) = delete;
    once_flag& operator=(const once_flag&) = delete;

private:
    template <typename Callable, typename... Args>
    friend void call_once(once_flag& flag, Callable&& f, Args&&... args);

    std::atomic<bool> done_{false};
    // Held while the callable runs: the other callers wait on it in turn, and each, once it has
    // the lock, runs the callable itself unless a run has returned meanwhile.
    mutex m_;
};

/// As std::call_once: runs f(args...) unless a call on `flag` has returned from it; a caller that
/// finds it running waits for that run. An exception from f goes out to its caller and leaves
/// the flag unset: the next caller (one waiting, or a later one) runs f. The wait is not
/// interruptible: an interrupt of the calling fiber stays pending for its next blocking call,
/// as for thread::join.
template <typename Callable, typename... Args>
void call_once(once_flag& flag, Callable&& f, Args&&... args) {
    if (flag.done_.load(std::memory_order_acquire)) return;
    std::lock_guard g(flag.m_);  // mutex::lock leaves an interrupt pending
    if (flag.done_.load(std::memory_order_relaxed)) return;
    std::invoke(std::forward<Callable>(f), std::forward<Args>(args)...);
    flag.done_.store(true, std::memory_order_release);
}

}  // namespace gluon::std_compat
