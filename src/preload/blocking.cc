// Fiber mode's blocking libc calls that have no asynchronous form: a program fiber's call runs
// on gluon's offload pool (plain OS threads) while the fiber parks, so the other fibers of its
// vCPU go on. Waits on children, file locks, name lookups, signals and semaphores (after a
// try that does not block); the poll family's signal-mask forms without a mask. What is still
// passed on as it is gets a warning naming it, once (docs/preload.md).
#include <netdb.h>
#include <poll.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/select.h>
#include <sys/wait.h>

#include <cerrno>
#include <climits>
#include <cstdlib>

#include "gluon/posix.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/runtime.h"
#include "preload.h"

namespace gluon::preload {
namespace {

// Runs call() on the offload pool and parks the calling program fiber until it returns. errno
// starts as the caller's and comes back as the call left it, as if the call had been made
// here. The job is handed over by a fiber of gluon's own: the pool may start a thread for it,
// which must be an OS thread, not a fiber. If that fiber cannot be made, the call blocks the
// vCPU instead.
template <typename F>
auto offloaded(F call) -> decltype(call()) {
    decltype(call()) r{};
    int err = errno;
    result<fiber> f = [&] {
        internal_scope s;
        return spawn([&] {
            offload([&] {
                errno = err;
                r = call();
                err = errno;
            });
        });
    }();
    if (!f) return call();
    (void)f->join();
    errno = err;
    return r;
}

// A gethostbyname-family call on the offload pool: glibc says why it failed in h_errno, which is
// per thread, so the offload thread's is copied back to the caller's, as errno is.
template <typename F>
hostent* offloaded_lookup(F call) {
    int h = h_errno;
    hostent* r = offloaded([&] {
        h_errno = h;
        hostent* e = call();
        h = h_errno;
        return e;
    });
    h_errno = h;
    return r;
}

// A sigwait-family call on an offload thread: the signals waited for are blocked there for the
// call (sigwait takes only blocked signals), as the program has them blocked in its threads.
template <typename F>
int with_blocked(const sigset_t* set, F call) {
    sigset_t old;
    pthread_sigmask(SIG_BLOCK, set, &old);
    const int r = call();
    const int err = errno;
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    errno = err;
    return r;
}

// False for a timespec timeout that is not a valid time (null is: no limit).
bool valid(const timespec* t) {
    return !t || (t->tv_sec >= 0 && t->tv_nsec >= 0 && t->tv_nsec < 1'000'000'000L);
}

// wait(ms) for the timespec timeout t (null: without limit, -1), a valid one.
template <typename W>
int wait_for(const timespec* t, W wait) {
    if (!t) return static_cast<int>(wait(-1));
    return static_cast<int>(wait_in_rounds(t->tv_sec, t->tv_nsec, wait));
}

int einval() {
    errno = EINVAL;
    return -1;
}

// A call of the poll family goes to libc when the caller is not a program fiber, or when it has
// a signal mask, which a fiber cannot have to itself (said once, by name: it blocks the vCPU).
bool to_libc(bool program_fiber, const sigset_t* mask, const char* what) {
    if (program_fiber && mask) note_vcpu_blocking(what);
    return !program_fiber || mask;
}

// Takes a semaphore that has a count without waiting; errno is left alone when it has none.
// (Process-shared semaphores are waited for the same way: the offload thread's wait is libc's.)
bool try_first(sem_t* s) {
    const int saved = errno;
    if (GLUON_REAL(sem_trywait)(s) == 0) return true;
    errno = saved;
    return false;
}

}  // namespace

int offloaded_fcntl(int (*real)(int, int, ...), int fd, int cmd, long arg) noexcept {
    return offloaded([&] { return real(fd, cmd, arg); });
}

}  // namespace gluon::preload

using namespace gluon::preload;
namespace px = gluon::posix;


extern "C" {

// A call that waits, made by a program fiber, runs on the offload pool; `waits` says whether
// this call would wait at all (WNOHANG, LOCK_NB: libc's answer comes at once).
#define GLUON_OFFLOADED(ret, fn, params, args, waits)                            \
    ret fn params {                                                             \
        if (!GLUON_PROGRAM_FIBER() || !(waits)) return GLUON_REAL(fn) args;      \
        return offloaded([&] { return GLUON_REAL(fn) args; });                  \
    }

// ---- children, file locks, commands, name lookups -----------------------------------------------
GLUON_OFFLOADED(pid_t, waitpid, (pid_t p, int* st, int o), (p, st, o), !(o & WNOHANG))
GLUON_OFFLOADED(pid_t, wait, (int* st), (st), true)
GLUON_OFFLOADED(pid_t, wait4, (pid_t p, int* st, int o, struct rusage* u) noexcept, (p, st, o, u), !(o & WNOHANG))
GLUON_OFFLOADED(int, waitid, (idtype_t t, id_t id, siginfo_t* i, int o), (t, id, i, o), !(o & WNOHANG))
GLUON_OFFLOADED(int, flock, (int fd, int op) noexcept, (fd, op), !(op & (LOCK_NB | LOCK_UN)))
GLUON_OFFLOADED(int, lockf, (int fd, int cmd, off_t len), (fd, cmd, len), cmd == F_LOCK)
GLUON_OFFLOADED(int, lockf64, (int fd, int cmd, off64_t len), (fd, cmd, len), cmd == F_LOCK)
GLUON_OFFLOADED(int, system, (const char* cmd), (cmd), true)
GLUON_OFFLOADED(int, getnameinfo,
                (const sockaddr* a, socklen_t al, char* host, socklen_t hl, char* serv, socklen_t sl, int f),
                (a, al, host, hl, serv, sl, f), true)
GLUON_OFFLOADED(int, gethostbyname_r,
                (const char* name, hostent* ret, char* buf, size_t n, hostent** result, int* h_errnop),
                (name, ret, buf, n, result, h_errnop), true)

// (glibc's gethostbyname* result is one static buffer for the whole process, whichever thread
// asks; their h_errno is the calling thread's, carried back from the offload thread.)
#define GLUON_OFFLOADED_LOOKUP(fn, params, args)                                  \
    hostent* fn params {                                                        \
        if (!GLUON_PROGRAM_FIBER()) return GLUON_REAL(fn) args;                 \
        return offloaded_lookup([&] { return GLUON_REAL(fn) args; });           \
    }
GLUON_OFFLOADED_LOOKUP(gethostbyname, (const char* name), (name))
GLUON_OFFLOADED_LOOKUP(gethostbyname2, (const char* name, int af), (name, af))
GLUON_OFFLOADED_LOOKUP(gethostbyaddr, (const void* addr, socklen_t len, int type), (addr, len, type))
GLUON_OFFLOADED(int, getaddrinfo, (const char* node, const char* service, const addrinfo* hints, addrinfo** res),
                (node, service, hints, res), true)

// ---- signals ------------------------------------------------------------------------------------
int sigwait(const sigset_t* s, int* sig) {
    if (!GLUON_PROGRAM_FIBER()) return GLUON_REAL(sigwait)(s, sig);
    return offloaded([&] { return with_blocked(s, [&] { return GLUON_REAL(sigwait)(s, sig); }); });
}
int sigwaitinfo(const sigset_t* s, siginfo_t* i) {
    if (!GLUON_PROGRAM_FIBER()) return GLUON_REAL(sigwaitinfo)(s, i);
    return offloaded([&] { return with_blocked(s, [&] { return GLUON_REAL(sigwaitinfo)(s, i); }); });
}
int sigtimedwait(const sigset_t* s, siginfo_t* i, const timespec* t) {
    if (!GLUON_PROGRAM_FIBER()) return GLUON_REAL(sigtimedwait)(s, i, t);
    return offloaded([&] { return with_blocked(s, [&] { return GLUON_REAL(sigtimedwait)(s, i, t); }); });
}

// ---- semaphores ---------------------------------------------------------------------------------
// A semaphore with a count is taken at once; only a wait offloads.
int sem_wait(sem_t* s) {
    if (!GLUON_PROGRAM_FIBER()) return GLUON_REAL(sem_wait)(s);
    if (try_first(s)) return 0;
    return offloaded([&] { return GLUON_REAL(sem_wait)(s); });
}
int sem_timedwait(sem_t* s, const timespec* t) {
    if (!GLUON_PROGRAM_FIBER()) return GLUON_REAL(sem_timedwait)(s, t);
    if (try_first(s)) return 0;
    return offloaded([&] { return GLUON_REAL(sem_timedwait)(s, t); });
}
int sem_clockwait(sem_t* s, clockid_t c, const timespec* t) {
    if (!GLUON_PROGRAM_FIBER()) return GLUON_REAL(sem_clockwait)(s, c, t);
    if (try_first(s)) return 0;
    return offloaded([&] { return GLUON_REAL(sem_clockwait)(s, c, t); });
}

// ---- the poll family with a signal mask ---------------------------------------------------------
// Without a mask they are poll, select and epoll_wait with a finer timeout. A mask cannot be
// swapped in for a fiber alone (it is the vCPU thread's): those calls are passed on, and block.
int ppoll(pollfd* f, nfds_t n, const timespec* t, const sigset_t* m) {
    if (to_libc(GLUON_PROGRAM_FIBER(), m, "ppoll with a signal mask")) return GLUON_REAL(ppoll)(f, n, t, m);
    if (!valid(t)) return einval();
    return keep_errno([&] { return wait_for(t, [&](int ms) { return px::poll(f, n, ms); }); });
}
int pselect(int n, fd_set* r, fd_set* w, fd_set* e, const timespec* t, const sigset_t* m) {
    if (to_libc(GLUON_PROGRAM_FIBER(), m, "pselect with a signal mask")) return GLUON_REAL(pselect)(n, r, w, e, t, m);
    if (!valid(t)) return einval();
    // (select's timeval is rounded up to the microsecond; pselect leaves its timespec alone.)
    timeval tv{};
    if (t) tv = {t->tv_sec, static_cast<suseconds_t>((t->tv_nsec + 999) / 1000)};
    return keep_errno([&] { return px::select(n, r, w, e, t ? &tv : nullptr); });
}
int epoll_pwait(int ep, epoll_event* e, int n, int t, const sigset_t* m) {
    if (to_libc(GLUON_PROGRAM_FIBER(), m, "epoll_pwait with a signal mask")) return GLUON_REAL(epoll_pwait)(ep, e, n, t, m);
    return keep_errno([&] { return px::epoll_wait(ep, e, n, t); });
}
int epoll_pwait2(int ep, epoll_event* e, int n, const timespec* t, const sigset_t* m) {
    if (to_libc(GLUON_PROGRAM_FIBER(), m, "epoll_pwait2 with a signal mask"))
        return GLUON_REAL(epoll_pwait2)(ep, e, n, t, m);
    if (!valid(t)) return einval();
    return keep_errno([&] { return wait_for(t, [&](int ms) { return px::epoll_wait(ep, e, n, ms); }); });
}

}  // extern "C"
