// The syscall floor for threads, time, signals and limits: the result or -errno, through
// sys/raw.h (ADR 0013). Errors: whatever the kernel returns, as -errno.
#pragma once

#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "gluon/sys/raw.h"

namespace gluon::sys {

/// FUTEX_WAIT_BITSET (any bit) on a private word until *abs_mono (CLOCK_MONOTONIC; nullptr:
/// forever), if it still holds `expected`.
inline long futex_wait(uint32_t* word, uint32_t expected, const timespec* abs_mono) noexcept {
    return GLUON_SYSCALL(::syscall(SYS_futex, word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, expected, abs_mono,
                                   nullptr, FUTEX_BITSET_MATCH_ANY),
                         SYS_futex, word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG, expected, abs_mono, nullptr,
                         FUTEX_BITSET_MATCH_ANY);
}
/// Wakes up to n threads waiting on a private futex word.
inline long futex_wake(uint32_t* word, int n) noexcept {
    return GLUON_SYSCALL(::syscall(SYS_futex, word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, n, nullptr, nullptr, 0),
                         SYS_futex, word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, n);
}
inline long membarrier(int cmd) noexcept {
    return GLUON_SYSCALL(::syscall(SYS_membarrier, cmd, 0, 0), SYS_membarrier, cmd, 0, 0);
}
inline long getpid() noexcept { return GLUON_SYSCALL(::getpid(), SYS_getpid); }
inline long gettid() noexcept { return GLUON_SYSCALL(::syscall(SYS_gettid), SYS_gettid); }
inline long sched_yield() noexcept { return GLUON_SYSCALL(::sched_yield(), SYS_sched_yield); }
/// Pins the calling thread to the CPUs in *set.
inline long set_affinity(const cpu_set_t* set) noexcept {
    return GLUON_SYSCALL(::sched_setaffinity(0, sizeof *set, set), SYS_sched_setaffinity, 0, sizeof *set, set);
}
/// Sleeps until the absolute CLOCK_MONOTONIC time *t: 0, or -EINTR if a signal came first.
/// (The libc wrapper returns the error number itself; this returns -errno like the rest.)
inline long sleep_until_mono(const timespec* t) noexcept {
#ifdef GLUON_SYS_VIA_LIBC
    return -static_cast<long>(::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, t, nullptr));
#else
    return call(SYS_clock_nanosleep, CLOCK_MONOTONIC, TIMER_ABSTIME, t, nullptr);
#endif
}
inline long sigaltstack(const stack_t* ss, stack_t* old) noexcept {
    return GLUON_SYSCALL(::sigaltstack(ss, old), SYS_sigaltstack, ss, old);
}
/// Changes the calling thread's signal mask (rt_sigprocmask with the kernel's 8-byte set).
inline long thread_sigmask(int how, const sigset_t* set, sigset_t* old) noexcept {
    return GLUON_SYSCALL(::sigprocmask(how, set, old), SYS_rt_sigprocmask, how, set, old, _NSIG / 8);
}
/// Takes one pending signal of *set off the calling thread without waiting: its number, or
/// -EAGAIN if none is pending.
inline long take_pending_signal(const sigset_t* set) noexcept {
    static constexpr timespec zero{};
    return GLUON_SYSCALL(::sigtimedwait(set, nullptr, &zero), SYS_rt_sigtimedwait, set, nullptr, &zero, _NSIG / 8);
}
/// Runs f (a system call writing to a socket or pipe that has no MSG_NOSIGNAL: sendfile,
/// splice) with SIGPIPE blocked on the calling thread, and takes back the SIGPIPE an -EPIPE
/// left pending: the caller sees EPIPE only, never the signal whose default action ends the
/// process. A thread that blocks SIGPIPE itself keeps what is pending for it. Returns f().
template <typename F>
long without_sigpipe(F&& f) {
    sigset_t pipe, old;
    sigemptyset(&pipe);
    sigaddset(&pipe, SIGPIPE);
    if (thread_sigmask(SIG_BLOCK, &pipe, &old) < 0) return f();
    const long r = f();
    if (r == -EPIPE && !sigismember(&old, SIGPIPE)) (void)take_pending_signal(&pipe);
    (void)thread_sigmask(SIG_SETMASK, &old, nullptr);
    return r;
}
/// Installs a signal handler. Through libc on purpose: on x86-64 a handler needs libc's
/// sa_restorer trampoline (rt_sigreturn), and libc translates its sigaction layout to the
/// kernel's. Called once at start-up, never on an I/O path, and not a function an I/O
/// interposer wraps (ADR 0013).
inline long sigaction(int sig, const struct sigaction* sa, struct sigaction* old) noexcept {
    return from_libc(::sigaction(sig, sa, old));
}
/// RLIMIT_* limits of this process (prlimit64 on ourselves).
inline long getrlimit(int resource, rlimit* out) noexcept {
    return GLUON_SYSCALL(::getrlimit(resource, out), SYS_prlimit64, 0, resource,
                         nullptr, out);
}

/// How many fd numbers the process can ever use: RLIMIT_NOFILE's hard limit (the soft limit
/// can be raised up to it at any time), capped at the kernel's largest possible fd table.
inline size_t fd_limit() noexcept {
    constexpr size_t k_kernel_max = size_t{1} << 30;  // fs.nr_open cannot exceed this
    rlimit rl{};
    if (sys::getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_max == RLIM_INFINITY || rl.rlim_max > k_kernel_max)
        return k_kernel_max;
    return rl.rlim_max < 1024 ? 1024 : static_cast<size_t>(rl.rlim_max);
}

}  // namespace gluon::sys
