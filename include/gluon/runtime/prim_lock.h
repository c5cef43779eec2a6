// The lock inside every waiter-based primitive (mutex, channel, condition_variable, ...).
//
// Atomic read-modify-writes cost 8-11 ns each on the machines we measure on, and a primitive
// used by the fibers of one vCPU only needs none: fibers of a vCPU never run at the same time,
// and an operation on a primitive never switches fibers in its middle. So the lock is *biased*:
// the first vCPU that takes it owns it and then locks it with plain loads and stores. The first
// time another vCPU or a plain thread takes it, the bias is revoked for good, without the
// owner's help (it may be blocked in a system call): an asymmetric Dekker handshake. The owner
// announces "inside a biased section" in a per-thread counter and then re-reads the lock's mode;
// the revoker marks the mode "revoking", issues membarrier(2) (a full barrier on every thread of
// the process), then waits for the owner's counter to read zero. After that the lock is an
// ordinary spinlock. The owner records *which* locks it is inside (a short per-thread stack),
// and a revoker waits only until the owner is outside the lock being revoked: two vCPUs that
// each revoke a lock of the other while inside one of their own do not wait for each other.
// (ADR 0006)
#pragma once

#include <atomic>
#include <cstdint>

#include "gluon/common/spinlock.h"

namespace gluon {

namespace detail {
/// Index + 1 of the calling thread's vCPU; 0 on a plain thread, or when biasing is unavailable
/// (no membarrier). Set by init/fini.
extern thread_local constinit uint32_t t_vcpu_tag;
/// The biased locks the calling vCPU thread is inside, innermost last; written only by its own
/// thread (plain stores: no read-modify-write), read by revokers.
inline constexpr int k_max_biased_depth = 8;
struct biased_sections {
    std::atomic<int> depth{0};
    std::atomic<const void*> held[k_max_biased_depth] = {};
};
extern thread_local constinit biased_sections t_biased;

/// Records entry into lk's biased section; false if the stack is full (take the slow path).
__attribute__((always_inline)) inline bool biased_enter(const void* lk) noexcept {
    const int d = t_biased.depth.load(std::memory_order_relaxed);
    if (d == k_max_biased_depth) return false;
    t_biased.held[d].store(lk, std::memory_order_relaxed);
    t_biased.depth.store(d + 1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // compiler-only: membarrier does the rest
    return true;
}
/// Leaving only lowers the depth: revokers read held[i] for i < depth only (the slot left
/// behind is overwritten, before depth is raised again, by the next enter).
__attribute__((always_inline)) inline void biased_leave() noexcept {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    t_biased.depth.store(t_biased.depth.load(std::memory_order_relaxed) - 1,
                         std::memory_order_release);
}
}  // namespace detail

class prim_lock {
public:
    struct shared_t {};
    /// Never biased: for locks that are cross-thread by nature.
    static constexpr shared_t shared{};

    prim_lock() noexcept = default;
    explicit prim_lock(shared_t) noexcept : mode_(k_shared) {}
    prim_lock(const prim_lock&) = delete;
    prim_lock& operator=(const prim_lock&) = delete;

    __attribute__((always_inline)) void lock() noexcept {
        const uint32_t tag = detail::t_vcpu_tag;
        if (tag != 0 && detail::biased_enter(this)) {
            const uint32_t m = mode_.load(std::memory_order_relaxed);
            if (m == tag) return;
            if (m == 0 && claim(tag)) return;
            detail::biased_leave();
        }
        lock_slow();
    }
    __attribute__((always_inline)) void unlock() noexcept {
        // Taken biased or as a spinlock? Only a shared lock can have been taken as a spinlock:
        // while it is "revoking", nobody takes the spinlock, and once it is shared, no biased
        // section of it is left (the revoker waited for them).
        if (mode_.load(std::memory_order_relaxed) == k_shared)
            lk_.unlock();
        else
            detail::biased_leave();
    }
    /// Biases a lock nobody can see yet to the calling vCPU (saves the claiming CAS).
    void claim_unpublished() noexcept { mode_.store(detail::t_vcpu_tag, std::memory_order_relaxed); }
    /// True once the bias has been revoked (for tests and diagnostics).
    bool is_shared() const noexcept { return mode_.load(std::memory_order_acquire) == k_shared; }

private:
    static constexpr uint32_t k_shared = ~uint32_t{0};
    static constexpr uint32_t k_revoking = ~uint32_t{0} - 1;
    bool claim(uint32_t tag) noexcept {
        uint32_t expected = 0;
        return mode_.compare_exchange_strong(expected, tag, std::memory_order_acq_rel);
    }
    void lock_slow() noexcept;

    std::atomic<uint32_t> mode_{0};  // 0 unclaimed, an owner's tag, k_revoking or k_shared
    spinlock lk_;
};

}  // namespace gluon
