// Fiber stacks: mmap'ed, lazily committed, with a guard page at the low end, recycled through a
// bounded per-vCPU cache. Private to the runtime.
//
// Stacks of the default size are carved out of slabs (one mapping of many stacks). Guard pages are
// installed with MADV_GUARD_INSTALL where the kernel has it (6.13+): that keeps a slab one VMA, so
// the default vm.max_map_count (65530) is no limit on the fiber count. Elsewhere the guard is an
// mprotect(PROT_NONE) page, which costs two VMAs per stack (ADR 0003).
#pragma once

#include <cstddef>
#include <vector>

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

/// A bounded per-vCPU cache of default-size stacks, hot in memory. Not thread-safe.
class stack_cache {
public:
    explicit stack_cache(size_t max_cached) : max_(max_cached) {}
    ~stack_cache();
    stack_cache(const stack_cache&) = delete;
    stack_cache& operator=(const stack_cache&) = delete;

    result<stack_mem> get(size_t usable);
    void put(stack_mem s);
    size_t cached() const { return free_.size(); }

private:
    size_t max_;
    std::vector<stack_mem> free_;
};

/// The default usable stack size (GLUON_STACK_SIZE env, in KiB, overrides it).
size_t default_stack_size();

}  // namespace gluon::detail
