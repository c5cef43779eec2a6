// A monitoring counter written by one thread and read by any: relaxed load and store rather than
// fetch_add, so counting costs no locked instruction on hot paths. A reader sees a value the
// counter had a moment ago.
#pragma once

#include <atomic>
#include <cstdint>

namespace gluon {

struct relaxed_counter {
    std::atomic<uint64_t> v{0};
    /// Only the owning thread adds (two writers would lose counts).
    void add(uint64_t d) noexcept {
        v.store(v.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
    }
    void set(uint64_t x) noexcept { v.store(x, std::memory_order_relaxed); }
    uint64_t get() const noexcept { return v.load(std::memory_order_relaxed); }
};

}  // namespace gluon
