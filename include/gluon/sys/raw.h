// The one way into the kernel: a system call instruction, issued inline. Every other gluon file
// enters the kernel through the sys:: wrappers built on this, never through libc's wrappers
// (read, write, socket, epoll_wait...), so that a library preloaded to interpose those (ADR 0013)
// can call into gluon without gluon calling back into it. Results follow the kernel's own
// convention, the value or -errno; errno is never touched.
//
// Sanitizer builds (and architectures without an inline sequence here) go through libc's named
// wrappers instead: the sanitizers learn about fd synchronisation and memory mappings by
// intercepting exactly those functions, and a mapping they never saw unmapped leaves stale
// shadow state behind.
#pragma once

#include <sys/syscall.h>

#include <cerrno>
#include <type_traits>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GLUON_SYS_VIA_LIBC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define GLUON_SYS_VIA_LIBC 1
#endif
#endif
#if !defined(GLUON_SYS_VIA_LIBC) && !defined(__x86_64__) && !defined(__aarch64__)
#define GLUON_SYS_VIA_LIBC 1
#endif

namespace gluon::sys {

/// A libc wrapper's result (-1 and errno on failure) in the kernel's convention (-errno).
inline long from_libc(long r) noexcept { return r < 0 ? -errno : r; }

namespace detail {

template <class T>
inline long arg(T v) noexcept {
    if constexpr (std::is_pointer_v<T>)
        return reinterpret_cast<long>(v);
    else
        return static_cast<long>(v);
}
inline long arg(decltype(nullptr)) noexcept { return 0; }

#if defined(__x86_64__) && !defined(GLUON_SYS_VIA_LIBC)
inline long invoke(long nr, long a, long b, long c, long d, long e, long f) noexcept {
    register long r10 __asm__("r10") = d;
    register long r8 __asm__("r8") = e;
    register long r9 __asm__("r9") = f;
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return ret;
}
#elif defined(__aarch64__) && !defined(GLUON_SYS_VIA_LIBC)
inline long invoke(long nr, long a, long b, long c, long d, long e, long f) noexcept {
    register long x8 __asm__("x8") = nr;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    register long x3 __asm__("x3") = d;
    register long x4 __asm__("x4") = e;
    register long x5 __asm__("x5") = f;
    __asm__ volatile("svc 0"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                     : "memory");
    return x0;
}
#endif

}  // namespace detail

#ifndef GLUON_SYS_VIA_LIBC
/// System call nr with up to six arguments: the result or -errno.
template <class... A>
inline long call(long nr, A... a) noexcept {
    static_assert(sizeof...(A) <= 6, "a system call takes at most six arguments");
    long v[6] = {detail::arg(a)...};
    return detail::invoke(nr, v[0], v[1], v[2], v[3], v[4], v[5]);
}
#endif

}  // namespace gluon::sys

// GLUON_SYSCALL(libc_expr, nr, args...): the raw system call, or, in a GLUON_SYS_VIA_LIBC build,
// libc_expr (a call of libc's wrapper). Only the sys:: headers use it.
#ifdef GLUON_SYS_VIA_LIBC
#define GLUON_SYSCALL(libc_expr, nr, ...) ::gluon::sys::from_libc(static_cast<long>(libc_expr))
#else
#define GLUON_SYSCALL(libc_expr, nr, ...) ::gluon::sys::call(nr __VA_OPT__(, ) __VA_ARGS__)
#endif
