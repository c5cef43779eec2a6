// Where a call into an interposer comes from. gluon itself is linked into this library (with
// its own copy of libstdc++), and its process-wide locks (the stack pool's, the fiber-local key
// registry's, the offload pool's) are std::mutex and std::condition_variable, that is, calls to
// pthread_mutex_lock and friends: the very functions fiber mode interposes. Made from a program
// fiber (the scheduler runs on the parked fiber's stack), they used to become gluon mutexes
// that park inside the scheduler, which corrupted it as soon as two vCPUs met at one lock.
// Calls whose return address lies in this library's code are therefore always libc's.
#include <dlfcn.h>
#include <link.h>

#include <cstdint>

#include "preload.h"

namespace gluon::preload {
namespace {

struct code_range {
    uintptr_t lo = 0, hi = 0;
};

// The executable segments of the object that holds `probe` (this library).
code_range find_range(uintptr_t probe) {
    struct ctx {
        uintptr_t probe;
        code_range r;
    } c{probe, {}};
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* p) {
            auto* c = static_cast<ctx*>(p);
            code_range r;
            bool mine = false;
            for (int i = 0; i < info->dlpi_phnum; ++i) {
                const ElfW(Phdr)& ph = info->dlpi_phdr[i];
                if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
                const uintptr_t lo = info->dlpi_addr + ph.p_vaddr, hi = lo + ph.p_memsz;
                if (c->probe >= lo && c->probe < hi) mine = true;
                if (!r.lo || lo < r.lo) r.lo = lo;
                if (hi > r.hi) r.hi = hi;
            }
            if (!mine) return 0;
            c->r = r;
            return 1;
        },
        &c);
    return c.r;
}

const code_range g_range = find_range(reinterpret_cast<uintptr_t>(&find_range));

}  // namespace

bool own_code(const void* return_address) noexcept {
    const auto a = reinterpret_cast<uintptr_t>(return_address);
    return a >= g_range.lo && a < g_range.hi;
}

}  // namespace gluon::preload
