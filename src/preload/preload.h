// libgluon_preload.so's shared state (docs/preload.md). Private to src/preload.
#pragma once

#include <dlfcn.h>

#include <cerrno>

#include "gluon/runtime/runtime.h"

namespace gluon::preload {

enum class mode { off, fibers, listen };
/// GLUON_PRELOAD, read once.
mode current_mode() noexcept;

/// The vCPUs program threads run on, started by the first pthread_create (so a program that
/// forks before making threads, as daemons do, forks a plain process). nullptr before.
runtime* started() noexcept;
runtime* start_runtime() noexcept;

/// True where the program's own code runs: its main thread and other threads gluon did not
/// make, and the fibers that stand for its threads. Elsewhere (vCPU schedulers, the offload
/// pool, gluon's own fibers) pthread calls are passed to libc, so gluon's std::mutex and
/// std::thread keep their usual meaning.
bool program_context() noexcept;

/// True if return_address lies in this library's code: gluon's own calls (its std::mutex,
/// std::condition_variable and std::thread), which must always reach libc (own_code.cc).
bool own_code(const void* return_address) noexcept;

/// The program made this pthread call, from a thread or fiber of its own: fiber mode handles
/// it. Used at the top of an interposer (the return address is the interposer's).
#define GLUON_PROGRAM_CALL()                                                                  \
    (::gluon::preload::current_mode() == ::gluon::preload::mode::fibers &&                     \
     !::gluon::preload::own_code(__builtin_return_address(0)) && ::gluon::preload::program_context())

/// Marks a stretch of gluon code called from program context that must see libc's pthreads
/// (creating fibers takes gluon's own locks). It must not park: the mark is per thread.
struct internal_scope {
    internal_scope() noexcept;
    ~internal_scope();
};

/// True while the calling thread runs one of the program's signal handlers (signals.cc): calls
/// made there go to libc as they are.
bool in_signal_handler() noexcept;

/// True when a call made now comes from a program fiber: fiber mode, on a vCPU, in program
/// context.
bool program_fiber() noexcept;

/// program_fiber(), and the interposer using it was called by the program, not by this library.
/// Used at the top of an interposer (the return address is the interposer's).
#define GLUON_PROGRAM_FIBER() \
    (::gluon::preload::program_fiber() && !::gluon::preload::own_code(__builtin_return_address(0)))

/// fcntl's waiting lock commands (F_SETLKW, F_OFD_SETLKW) for a program fiber: run by `real`
/// on the offload pool while the fiber parks (blocking.cc).
int offloaded_fcntl(int (*real)(int, int, ...), int fd, int cmd, long arg) noexcept;

/// Runs f (an interposed call that returns -1 on failure) and, if it succeeds, gives the caller
/// back the errno it had: another fiber of the vCPU may have set the thread's errno while the
/// caller was parked.
template <typename F>
auto keep_errno(F f) {
    const int saved = errno;
    auto r = f();
    if (r >= 0) errno = saved;
    return r;
}

/// Unlocks the pthread_once controls whose init routines the calling fiber is inside (locks.cc),
/// leaving them not done: pthread_exit calls it before its longjmp skips their unlocking, so
/// that the next caller runs its routine (POSIX: as if pthread_once had not been called).
void abandon_once_routines() noexcept;

/// Runs wait(ms), a call of the poll family with an int timeout in milliseconds, for a valid
/// timeout of sec seconds and ns nanoseconds (rounded up to the millisecond): in rounds of
/// about 24 days while more is left than an int of milliseconds holds. Returns the first
/// result that is not 0 (ready, or failed), or the last round's 0. (sec * 1000 wrapped: a
/// tv_sec of 2^61 came out as 0 ms and the call returned at once.)
template <typename W>
long wait_in_rounds(long long sec, long ns, W wait) {
    constexpr long long k_round_s = 2'000'000;  // 2,000,000,000 ms fits an int
    for (; sec > k_round_s; sec -= k_round_s)
        if (const long r = wait(static_cast<int>(k_round_s * 1000)); r != 0) return r;
    return wait(static_cast<int>(sec * 1000 + (ns + 999'999) / 1'000'000));
}

/// Logs `name` once per process as a call that blocks the whole vCPU when made from a fiber.
void note_vcpu_blocking(const char* name) noexcept;

/// libc's definition of a symbol this library interposes.
template <typename F>
F real(const char* name) noexcept {
    return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}
#define GLUON_REAL(fn) ([] {                                                             \
    static auto p = ::gluon::preload::real<decltype(&::fn)>(#fn);                          \
    return p;                                                                              \
}())

}  // namespace gluon::preload
