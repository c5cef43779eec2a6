#include "stack.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "gluon/common/lazy.h"
#include "gluon/sys/mm.h"

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define GLUON_HAVE_VALGRIND 1
#endif

#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

namespace gluon::detail {
namespace {

constexpr size_t k_page = 4096;
constexpr size_t k_slab_stacks = 64;

size_t round_page(size_t n) { return (n + k_page - 1) & ~(k_page - 1); }

// -1 unknown, 0 no, 1 yes
std::atomic<int> g_guard_madvise{-1};

int install_guard(char* lo) {
    if (g_guard_madvise.load(std::memory_order_relaxed) != 0) {
        if (sys::madvise(lo, k_guard_size, MADV_GUARD_INSTALL) == 0) {
            g_guard_madvise.store(1, std::memory_order_relaxed);
            return 0;
        }
        g_guard_madvise.store(0, std::memory_order_relaxed);
    }
    return static_cast<int>(sys::mprotect(lo, k_guard_size, PROT_NONE));
}

// Process-wide free list of default-size stacks (decommitted) and the slab they come from.
struct global_stacks {
    std::mutex mu;
    std::vector<stack_mem> free;
};
constinit lazy_ptr<global_stacks> g_stacks;  // never destroyed: stacks may be freed at exit
global_stacks& globals() {
    return g_stacks.get([] { return new global_stacks; });
}

int map_slab(size_t stack_bytes, std::vector<stack_mem>& out) {
    size_t total = stack_bytes * k_slab_stacks;
    void* p = sys::mmap(nullptr, total, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (sys::is_error(p)) return static_cast<int>(reinterpret_cast<long>(p));
    auto* base = static_cast<char*>(p);
    for (size_t i = 0; i < k_slab_stacks; ++i) {
        char* lo = base + i * stack_bytes;
        if (int r = install_guard(lo); r < 0) {
            (void)sys::munmap(base, total);
            return r;
        }
        out.push_back({lo, stack_bytes});
    }
    return 0;
}

// Tells valgrind that this memory is a stack, so switching onto it is not reported as a wild
// stack pointer change; undone in stack_free.
void register_stack([[maybe_unused]] stack_mem& s) {
#ifdef GLUON_HAVE_VALGRIND
    if (RUNNING_ON_VALGRIND) s.vg_id = VALGRIND_STACK_REGISTER(s.lo + k_guard_size, s.top());
#endif
}

void deregister_stack([[maybe_unused]] stack_mem& s) {
#ifdef GLUON_HAVE_VALGRIND
    if (s.vg_id) VALGRIND_STACK_DEREGISTER(s.vg_id);
    s.vg_id = 0;
#endif
}

}  // namespace

namespace {
std::atomic<size_t> g_default_stack{0};
}

size_t default_stack_size() {
    size_t size = g_default_stack.load(std::memory_order_relaxed);
    if (size == 0) {
        size_t kib = 256;
        if (const char* env = std::getenv("GLUON_STACK_SIZE")) {
            long v = std::strtol(env, nullptr, 10);
            if (v >= 16 && v <= 1024 * 1024) kib = static_cast<size_t>(v);
        }
        size = kib * 1024;
        g_default_stack.store(size, std::memory_order_relaxed);
    }
    return size;
}

size_t stack_round(size_t usable) { return round_page(usable) + k_guard_size; }

result<stack_mem> stack_alloc(size_t usable) {
    size_t bytes = stack_round(usable);
    if (bytes == stack_round(default_stack_size())) {
        auto& g = globals();
        std::lock_guard lk(g.mu);
        if (g.free.empty()) {
            if (int r = map_slab(bytes, g.free); r < 0) return errno_error(-r);
        }
        stack_mem s = g.free.back();
        g.free.pop_back();
        register_stack(s);
        return s;
    }
    void* p = sys::mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (sys::is_error(p)) return errno_error(static_cast<int>(-reinterpret_cast<long>(p)));
    stack_mem s{static_cast<char*>(p), bytes};
    if (int r = install_guard(s.lo); r < 0) {
        (void)sys::munmap(p, bytes);
        return errno_error(-r);
    }
    register_stack(s);
    return s;
}

void stack_free(stack_mem s) {
    if (s.empty()) return;
    deregister_stack(s);
    if (s.size == stack_round(default_stack_size())) {
        // Give the memory back but keep the address range (and its guard) for reuse.
        (void)sys::madvise(s.lo + k_guard_size, s.size - k_guard_size, MADV_DONTNEED);
        auto& g = globals();
        std::lock_guard lk(g.mu);
        g.free.push_back(s);
        return;
    }
    (void)sys::munmap(s.lo, s.size);
}

stack_cache::~stack_cache() {
    for (size_t i = 0; i < n_; ++i) stack_free(free_[i]);
}

}  // namespace gluon::detail
