// The syscall floor for memory mappings (fiber stacks, signal stacks): the result or -errno,
// through sys/raw.h (ADR 0013). Errors: whatever the kernel returns, as -errno.
#pragma once

#include <sys/mman.h>

#include <cstddef>

#include "gluon/sys/raw.h"

namespace gluon::sys {

/// Maps memory: the address, or -errno cast to a pointer (check with is_error()).
inline void* mmap(void* addr, size_t len, int prot, int flags, int fd, long off) noexcept {
#ifdef GLUON_SYS_VIA_LIBC
    void* p = ::mmap(addr, len, prot, flags, fd, off);
    return p == MAP_FAILED ? reinterpret_cast<void*>(-static_cast<long>(errno)) : p;
#else
    return reinterpret_cast<void*>(call(SYS_mmap, addr, len, prot, flags, fd, off));
#endif
}
/// True if a pointer from mmap() is an -errno (the kernel's addresses never reach the top page).
inline bool is_error(const void* p) noexcept {
    return reinterpret_cast<unsigned long>(p) > static_cast<unsigned long>(-4096);
}
inline long munmap(void* addr, size_t len) noexcept {
    return GLUON_SYSCALL(::munmap(addr, len), SYS_munmap, addr, len);
}
inline long mprotect(void* addr, size_t len, int prot) noexcept {
    return GLUON_SYSCALL(::mprotect(addr, len, prot), SYS_mprotect, addr, len, prot);
}
inline long madvise(void* addr, size_t len, int advice) noexcept {
    return GLUON_SYSCALL(::madvise(addr, len, advice), SYS_madvise, addr, len, advice);
}

}  // namespace gluon::sys
