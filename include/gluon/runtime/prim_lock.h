// The lock inside every waiter-based primitive (mutex, channel, condition_variable, ...).
//
// Atomic read-modify-writes cost 8-11 ns each on the machines we measure on, and a primitive
// used by the fibers of one vCPU only needs none: fibers of a vCPU never run at the same time,
// and an operation on a primitive never switches fibers in its middle. So the lock is *biased*:
// the first vCPU that takes it owns it and locks with one plain load. When any other vCPU or
// plain thread takes it, the bias is revoked for good: the revoker asks the owning vCPU (through
// its inbox) to drop it, which that vCPU does between two fiber switches, when no operation on
// the primitive can be half done; from then on it is an ordinary spinlock. (ADR 0006)
#pragma once

#include <atomic>
#include <cstdint>

#include "gluon/common/spinlock.h"

namespace gluon {

namespace detail {
/// Index + 1 of the calling thread's vCPU; 0 on a plain thread. Set by init/fini.
extern thread_local constinit uint32_t t_vcpu_tag;
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

    void lock() noexcept {
        const uint32_t tag = detail::t_vcpu_tag;
        if (tag != 0 && mode_.load(std::memory_order_relaxed) == tag) return;
        lock_slow(tag);
    }
    void unlock() noexcept {
        // The mode cannot change between our lock() and unlock(): revocation by another thread
        // waits until the owner is between fiber switches, and we hold the lock in between.
        if (mode_.load(std::memory_order_relaxed) == k_shared) lk_.unlock();
    }
    /// Biases a lock nobody can see yet to the calling vCPU (saves the claiming CAS).
    void claim_unpublished() noexcept {
        mode_.store(detail::t_vcpu_tag, std::memory_order_relaxed);
    }
    /// True once the bias has been revoked (for tests and diagnostics).
    bool is_shared() const noexcept { return mode_.load(std::memory_order_acquire) == k_shared; }

private:
    static constexpr uint32_t k_shared = ~uint32_t{0};
    void lock_slow(uint32_t tag) noexcept;
    void revoke(uint32_t owner) noexcept;

    std::atomic<uint32_t> mode_{0};  // 0 unclaimed, k_shared, or the owning vCPU's tag
    spinlock lk_;
};

}  // namespace gluon
