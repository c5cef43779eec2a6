// A table indexed by fd number that covers every fd the process may open: a fixed directory of
// chunk pointers, sized once (sys::fd_limit(): RLIMIT_NOFILE's hard limit), and chunks of k_chunk entries
// allocated on first write. Lookups are lock-free (one acquire load of the chunk pointer);
// entries never move and chunks are never freed, so a reference stays valid for the table's
// life. A chunk that was never written reads as value-initialised entries.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <new>

namespace gluon {

template <typename T>
class fd_table {
public:
    static constexpr size_t k_chunk = 4096;

    /// A table for fd numbers [0, capacity), rounded up to whole chunks.
    explicit fd_table(size_t capacity)
        : n_chunks_((capacity + k_chunk - 1) / k_chunk),
          dir_(new (std::nothrow) std::atomic<T*>[n_chunks_]()) {
        if (!dir_) n_chunks_ = 0;
    }
    ~fd_table() {
        for (size_t i = 0; i < n_chunks_; ++i) delete[] dir_[i].load(std::memory_order_relaxed);
    }
    fd_table(const fd_table&) = delete;
    fd_table& operator=(const fd_table&) = delete;

    /// fd numbers the table covers.
    size_t capacity() const noexcept { return n_chunks_ * k_chunk; }
    /// How many chunks have been allocated (for tests and diagnostics).
    size_t chunks_in_use() const noexcept {
        size_t n = 0;
        for (size_t i = 0; i < n_chunks_; ++i) n += dir_[i].load(std::memory_order_relaxed) != nullptr;
        return n;
    }

    /// The entry for fd if its chunk exists, else nullptr (read it as a default T). Never
    /// allocates. Errors: nullptr also for fd < 0 or beyond capacity().
    T* find(int fd) const noexcept {
        if (fd < 0 || static_cast<size_t>(fd) >= capacity()) return nullptr;
        T* c = dir_[static_cast<size_t>(fd) / k_chunk].load(std::memory_order_acquire);
        return c ? &c[static_cast<size_t>(fd) % k_chunk] : nullptr;
    }
    /// The entry for fd, allocating its chunk on first use. Thread-safe: racing allocators
    /// agree on one chunk. Errors: nullptr for fd < 0, beyond capacity(), or out of memory.
    T* get(int fd) noexcept {
        if (T* e = find(fd)) return e;
        if (fd < 0 || static_cast<size_t>(fd) >= capacity()) return nullptr;
        std::atomic<T*>& slot = dir_[static_cast<size_t>(fd) / k_chunk];
        T* fresh = new (std::nothrow) T[k_chunk]();
        if (!fresh) return nullptr;
        T* expected = nullptr;
        if (!slot.compare_exchange_strong(expected, fresh, std::memory_order_acq_rel, std::memory_order_acquire)) {
            delete[] fresh;  // another thread got there first: use its chunk
            fresh = expected;
        }
        return &fresh[static_cast<size_t>(fd) % k_chunk];
    }

private:
    size_t n_chunks_;
    std::unique_ptr<std::atomic<T*>[]> dir_;
};

}  // namespace gluon
