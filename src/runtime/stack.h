// Fiber stacks: mmap'ed, lazily committed, with a guard page at the low end, recycled through a
// bounded per-vCPU cache. Private to the runtime.
//
// Stacks of the default size are carved out of slabs (one mapping of many stacks). Guard pages are
// installed with MADV_GUARD_INSTALL where the kernel has it (6.13+): that keeps a slab one VMA, so
// the default vm.max_map_count (65530) is no limit on the fiber count. Elsewhere the guard is an
// mprotect(PROT_NONE) page, which costs two VMAs per stack (ADR 0003).
#pragma once

#include <cstddef>
#include <memory>

#include "gluon/common/result.h"

namespace gluon::detail {

struct stack_mem {
    char* lo = nullptr;  // lowest address, start of the guard page
    size_t size = 0;     // total bytes including the guard page
    unsigned vg_id = 0;  // valgrind's stack id while registered
    char* top() const { return lo + size; }
    bool empty() const { return lo == nullptr; }
};

inline constexpr size_t k_guard_size = 4096;

/// Rounds a requested usable stack size to what a stack of that request really gets.
size_t stack_round(size_t usable);

/// Allocates a stack whose usable size is at least `usable` bytes (ENOMEM on failure).
result<stack_mem> stack_alloc(size_t usable);
/// Returns a stack to the process-wide free list (decommitting its pages) or unmaps it.
void stack_free(stack_mem s);
/// True if addr lies in the guard page of s.
inline bool in_guard(const stack_mem& s, const void* addr) {
    auto* p = static_cast<const char*>(addr);
    return p >= s.lo && p < s.lo + k_guard_size;
}

/// The default usable stack size (GLUON_STACK_SIZE env, in KiB, overrides it).
size_t default_stack_size();

/// A bounded per-vCPU cache of default-size stacks, hot in memory. Not thread-safe. get/put are
/// inline: they are on the path of every spawn.
class stack_cache {
public:
    explicit stack_cache(size_t max_cached)
        : max_(max_cached),
          usable_(default_stack_size()),
          bytes_(stack_round(usable_)),
          free_(new stack_mem[max_cached]) {}
    ~stack_cache();
    stack_cache(const stack_cache&) = delete;
    stack_cache& operator=(const stack_cache&) = delete;

    /// The default usable size, read once.
    size_t default_usable() const noexcept { return usable_; }
    /// Total bytes (guard page included) of a default-size stack.
    size_t default_bytes() const noexcept { return bytes_; }
    /// A cached stack for `usable` bytes, or an empty one (allocate with stack_alloc then).
    stack_mem take(size_t usable) noexcept {
        if (n_ == 0 || (usable != usable_ && stack_round(usable) != bytes_)) return {};
        return free_[--n_];
    }
    void put(const stack_mem& s) noexcept {
        if (n_ < max_ && s.size == bytes_) {
            free_[n_++] = s;
            return;
        }
        stack_free(s);
    }
    size_t cached() const { return n_; }

private:
    size_t max_;
    size_t usable_;
    size_t bytes_;
    size_t n_ = 0;
    std::unique_ptr<stack_mem[]> free_;  // max_ slots, allocated once
};

}  // namespace gluon::detail
