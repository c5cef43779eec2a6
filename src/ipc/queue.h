// shmipc's IO queue: a single-producer single-consumer ring of 12-byte elements in shared memory,
// with a 24-byte header whose field order depends on the CPU (shmipc-go changed it for arm64).
// head and tail only grow; element i lives at 24 + (i mod cap) * 12.
//
// On x86-64 the 64-bit head and tail sit at offsets 4 and 12: misaligned. They are accessed with
// __atomic builtins on int64_t*, which compile to plain moves and lock-prefixed instructions
// (x86 keeps them atomic inside a cache line), never to libatomic's lock-based fallback, which
// the Go peer would not honour. Capacities whose second queue would put head or tail across a
// cache line are refused (see straddles()).
#pragma once

#include <cstddef>
#include <cstdint>

namespace gluon::ipc {

struct queue_layout {
    uint32_t head, tail, flag;
};
inline constexpr queue_layout k_queue_amd64{4, 12, 20};
inline constexpr queue_layout k_queue_arm64{8, 16, 4};
#if defined(__aarch64__) || defined(__arm__)
inline constexpr queue_layout k_queue_native = k_queue_arm64;
#else
inline constexpr queue_layout k_queue_native = k_queue_amd64;
#endif
inline constexpr size_t k_queue_header = 24;
inline constexpr size_t k_queue_element = 12;
/// One queue's bytes for cap elements; the queue region holds two (client->server first).
inline constexpr size_t queue_bytes(uint32_t cap) noexcept { return k_queue_header + k_queue_element * size_t(cap); }

struct queue_element {
    uint32_t stream_id;
    uint32_t offset;  // absolute offset of the first slice's header in the buffer region
    uint32_t status;  // low byte: 0 data, 1 closed
};

/// True if, for a queue region of two queues of cap elements, a 64-bit field of the second
/// queue would cross a 64-byte cache line (every atomic on it a split lock).
inline bool straddles(uint32_t cap, const queue_layout& l = k_queue_native) noexcept {
    size_t base = queue_bytes(cap);
    for (size_t off : {base + l.head, base + l.tail})
        if (off / 64 != (off + 7) / 64) return true;
    return false;
}

/// A view of one queue. Every index read from shared memory is checked: a peer that moves head
/// or tail out of range is reported (put/pop return bad), never trusted.
class queue_view {
public:
    enum class outcome { ok, empty, full, bad };

    queue_view() noexcept = default;
    queue_view(uint8_t* base, uint32_t cap, const queue_layout& l = k_queue_native) noexcept
        : base_(base), cap_(cap), l_(l) {}

    /// Formats a zeroed queue: writes its capacity.
    static void format(uint8_t* base, uint32_t cap) noexcept { *reinterpret_cast<uint32_t*>(base) = cap; }
    /// The capacity written in shared memory.
    static uint32_t stored_cap(const uint8_t* base) noexcept { return *reinterpret_cast<const uint32_t*>(base); }

    uint32_t cap() const noexcept { return cap_; }
    int64_t head() const noexcept { return __atomic_load_n(i64(l_.head), __ATOMIC_ACQUIRE); }
    int64_t tail() const noexcept { return __atomic_load_n(i64(l_.tail), __ATOMIC_ACQUIRE); }
    int64_t size() const noexcept { return tail() - head(); }

    /// Producer side (one producer at a time: the session serialises its writers).
    outcome put(const queue_element& e) noexcept {
        int64_t t = tail(), h = head();
        if (t < 0 || h < 0 || t < h || t - h > cap_) return outcome::bad;
        if (t - h == cap_) return outcome::full;
        uint32_t* slot = elem(t);
        __atomic_store_n(slot, e.stream_id, __ATOMIC_RELAXED);
        __atomic_store_n(slot + 1, e.offset, __ATOMIC_RELAXED);
        __atomic_store_n(slot + 2, e.status, __ATOMIC_RELAXED);
        // seq_cst: publishes the element (release) and orders this increment before the
        // producer's later load/CAS of the working flag (the Dekker handshake, see mark_working).
        __atomic_fetch_add(i64(l_.tail), 1, __ATOMIC_SEQ_CST);
        return outcome::ok;
    }

    /// Consumer side (one consumer: the session's reader).
    outcome pop(queue_element& e) noexcept {
        int64_t h = head(), t = tail();
        if (h < 0 || t < h || t - h > cap_) return t == h ? outcome::empty : outcome::bad;
        if (h == t) return outcome::empty;
        const uint32_t* slot = elem(h);
        e.stream_id = __atomic_load_n(slot, __ATOMIC_RELAXED);
        e.offset = __atomic_load_n(slot + 1, __ATOMIC_RELAXED);
        e.status = __atomic_load_n(slot + 2, __ATOMIC_RELAXED);
        __atomic_fetch_add(i64(l_.head), 1, __ATOMIC_RELEASE);
        return outcome::ok;
    }

    /// Producer: flips the consumer's working flag 0 -> 1; true if this call did it (the
    /// consumer must then be woken with a Polling message).
    bool mark_working() noexcept {
        uint32_t zero = 0;
        return __atomic_compare_exchange_n(flag(), &zero, 1u, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    }
    /// Consumer: clears its working flag, then re-checks the queue (seq_cst on both: a producer
    /// that put after the check sees the flag clear and wakes us). True if the queue was empty and
    /// the flag stays clear; false if more arrived and the flag is set again.
    bool mark_not_working() noexcept {
        __atomic_store_n(flag(), 0u, __ATOMIC_SEQ_CST);
        if (__atomic_load_n(i64(l_.tail), __ATOMIC_SEQ_CST) == __atomic_load_n(i64(l_.head), __ATOMIC_SEQ_CST))
            return true;
        __atomic_store_n(flag(), 1u, __ATOMIC_SEQ_CST);
        return false;
    }
    uint32_t working_flag() const noexcept { return __atomic_load_n(flag(), __ATOMIC_ACQUIRE); }

private:
    int64_t* i64(uint32_t off) const noexcept { return reinterpret_cast<int64_t*>(base_ + off); }
    uint32_t* flag() const noexcept { return reinterpret_cast<uint32_t*>(base_ + l_.flag); }
    uint32_t* elem(int64_t i) const noexcept {
        return reinterpret_cast<uint32_t*>(base_ + k_queue_header + size_t(i % cap_) * k_queue_element);
    }

    uint8_t* base_ = nullptr;
    uint32_t cap_ = 0;
    queue_layout l_ = k_queue_native;
};

}  // namespace gluon::ipc
