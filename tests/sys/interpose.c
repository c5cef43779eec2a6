// Interposes libc's system-call wrappers in this executable, the way a preloaded library
// would: every call is counted, then forwarded to libc (dlsym RTLD_NEXT). gluon is linked
// statically into the same executable, so any call it made to one of these would land here.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include "interpose.h"

enum {
    k_read,
    k_write,
    k_readv,
    k_writev,
    k_pread,
    k_pread64,
    k_pwrite,
    k_pwrite64,
    k_preadv,
    k_pwritev,
    k_preadv2,
    k_pwritev2,
    k_recv,
    k_recvfrom,
    k_recvmsg,
    k_send,
    k_sendto,
    k_sendmsg,
    k_socket,
    k_socketpair,
    k_bind,
    k_listen,
    k_accept,
    k_accept4,
    k_connect,
    k_close,
    k_shutdown,
    k_setsockopt,
    k_getsockopt,
    k_getsockname,
    k_getpeername,
    k_epoll_create1,
    k_epoll_ctl,
    k_epoll_wait,
    k_epoll_pwait,
    k_epoll_pwait2,
    k_eventfd,
    k_pipe2,
    k_poll,
    k_ppoll,
    k_fstat,
    k_fstatfs,
    k_statx,
    k_fsync,
    k_fdatasync,
    k_ftruncate,
    k_fallocate,
    k_sendfile,
    k_splice,
    k_unlinkat,
    k_mkdirat,
    k_mmap,
    k_munmap,
    k_mprotect,
    k_madvise,
    k_sched_yield,
    k_open,
    k_open64,
    k_openat,
    k_openat64,
    k_fcntl,
    k_fcntl64,
    k_syscall,
    k_count
};

static const char* const k_names[k_count] = {"read", "write", "readv", "writev", "pread", "pread64", "pwrite", "pwrite64", "preadv", "pwritev", "preadv2", "pwritev2", "recv", "recvfrom", "recvmsg", "send", "sendto", "sendmsg", "socket", "socketpair", "bind", "listen", "accept", "accept4", "connect", "close", "shutdown", "setsockopt", "getsockopt", "getsockname", "getpeername", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd", "pipe2", "poll", "ppoll", "fstat", "fstatfs", "statx", "fsync", "fdatasync", "ftruncate", "fallocate", "sendfile", "splice", "unlinkat", "mkdirat", "mmap", "munmap", "mprotect", "madvise", "sched_yield", "open", "open64", "openat", "openat64", "fcntl", "fcntl64", "syscall"};
static atomic_ulong g_calls[k_count];

static void* next_fn(const char* name) {
    void* f = dlsym(RTLD_NEXT, name);
    if (!f) abort();  // no libc to forward to: nothing sensible to do
    return f;
}

#define FORWARD(ret, name, params, args)                                        \
    ret name params {                                                            \
        static ret(*real) params;                                                \
        atomic_fetch_add_explicit(&g_calls[k_##name], 1, memory_order_relaxed); \
        if (!real) real = (ret(*) params)next_fn(#name);                         \
        return real args;                                                        \
    }

FORWARD(ssize_t, read, (int fd, void* b, size_t n), (fd, b, n))
FORWARD(ssize_t, write, (int fd, const void* b, size_t n), (fd, b, n))
FORWARD(ssize_t, readv, (int fd, const struct iovec* v, int c), (fd, v, c))
FORWARD(ssize_t, writev, (int fd, const struct iovec* v, int c), (fd, v, c))
FORWARD(ssize_t, pread, (int fd, void* b, size_t n, off_t o), (fd, b, n, o))
FORWARD(ssize_t, pread64, (int fd, void* b, size_t n, off64_t o), (fd, b, n, o))
FORWARD(ssize_t, pwrite, (int fd, const void* b, size_t n, off_t o), (fd, b, n, o))
FORWARD(ssize_t, pwrite64, (int fd, const void* b, size_t n, off64_t o), (fd, b, n, o))
FORWARD(ssize_t, preadv, (int fd, const struct iovec* v, int c, off_t o), (fd, v, c, o))
FORWARD(ssize_t, pwritev, (int fd, const struct iovec* v, int c, off_t o), (fd, v, c, o))
FORWARD(ssize_t, preadv2, (int fd, const struct iovec* v, int c, off_t o, int f), (fd, v, c, o, f))
FORWARD(ssize_t, pwritev2, (int fd, const struct iovec* v, int c, off_t o, int f), (fd, v, c, o, f))
FORWARD(ssize_t, recv, (int fd, void* b, size_t n, int f), (fd, b, n, f))
FORWARD(ssize_t, recvfrom, (int fd, void* b, size_t n, int f, struct sockaddr* a, socklen_t* l), (fd, b, n, f, a, l))
FORWARD(ssize_t, recvmsg, (int fd, struct msghdr* m, int f), (fd, m, f))
FORWARD(ssize_t, send, (int fd, const void* b, size_t n, int f), (fd, b, n, f))
FORWARD(ssize_t, sendto, (int fd, const void* b, size_t n, int f, const struct sockaddr* a, socklen_t l), (fd, b, n, f, a, l))
FORWARD(ssize_t, sendmsg, (int fd, const struct msghdr* m, int f), (fd, m, f))
FORWARD(int, socket, (int d, int t, int p), (d, t, p))
FORWARD(int, socketpair, (int d, int t, int p, int sv[2]), (d, t, p, sv))
FORWARD(int, bind, (int fd, const struct sockaddr* a, socklen_t l), (fd, a, l))
FORWARD(int, listen, (int fd, int n), (fd, n))
FORWARD(int, accept, (int fd, struct sockaddr* a, socklen_t* l), (fd, a, l))
FORWARD(int, accept4, (int fd, struct sockaddr* a, socklen_t* l, int f), (fd, a, l, f))
FORWARD(int, connect, (int fd, const struct sockaddr* a, socklen_t l), (fd, a, l))
FORWARD(int, close, (int fd), (fd))
FORWARD(int, shutdown, (int fd, int h), (fd, h))
FORWARD(int, setsockopt, (int fd, int lv, int nm, const void* v, socklen_t l), (fd, lv, nm, v, l))
FORWARD(int, getsockopt, (int fd, int lv, int nm, void* v, socklen_t* l), (fd, lv, nm, v, l))
FORWARD(int, getsockname, (int fd, struct sockaddr* a, socklen_t* l), (fd, a, l))
FORWARD(int, getpeername, (int fd, struct sockaddr* a, socklen_t* l), (fd, a, l))
FORWARD(int, epoll_create1, (int f), (f))
FORWARD(int, epoll_ctl, (int ep, int op, int fd, struct epoll_event* e), (ep, op, fd, e))
FORWARD(int, epoll_wait, (int ep, struct epoll_event* e, int n, int t), (ep, e, n, t))
FORWARD(int, epoll_pwait, (int ep, struct epoll_event* e, int n, int t, const sigset_t* s), (ep, e, n, t, s))
FORWARD(int, epoll_pwait2, (int ep, struct epoll_event* e, int n, const struct timespec* t, const sigset_t* s), (ep, e, n, t, s))
FORWARD(int, eventfd, (unsigned int v, int f), (v, f))
FORWARD(int, pipe2, (int p[2], int f), (p, f))
FORWARD(int, poll, (struct pollfd* p, nfds_t n, int t), (p, n, t))
FORWARD(int, ppoll, (struct pollfd* p, nfds_t n, const struct timespec* t, const sigset_t* s), (p, n, t, s))
FORWARD(int, fstat, (int fd, struct stat* s), (fd, s))
FORWARD(int, fstatfs, (int fd, struct statfs* s), (fd, s))
FORWARD(int, statx, (int d, const char* p, int f, unsigned int m, struct statx* s), (d, p, f, m, s))
FORWARD(int, fsync, (int fd), (fd))
FORWARD(int, fdatasync, (int fd), (fd))
FORWARD(int, ftruncate, (int fd, off_t l), (fd, l))
FORWARD(int, fallocate, (int fd, int m, off_t o, off_t l), (fd, m, o, l))
FORWARD(ssize_t, sendfile, (int o, int i, off_t* off, size_t n), (o, i, off, n))
FORWARD(ssize_t, splice, (int i, loff_t* io, int o, loff_t* oo, size_t n, unsigned int f), (i, io, o, oo, n, f))
FORWARD(int, unlinkat, (int d, const char* p, int f), (d, p, f))
FORWARD(int, mkdirat, (int d, const char* p, mode_t m), (d, p, m))
FORWARD(void*, mmap, (void* a, size_t n, int p, int f, int fd, off_t o), (a, n, p, f, fd, o))
FORWARD(int, munmap, (void* a, size_t n), (a, n))
FORWARD(int, mprotect, (void* a, size_t n, int p), (a, n, p))
FORWARD(int, madvise, (void* a, size_t n, int adv), (a, n, adv))
FORWARD(int, sched_yield, (void), ())

// The variadic ones: the optional argument is a mode, an int or a pointer; forwarded as a word.
#define FORWARD_VA2(name)                                                        \
    int name(const char* p, int f, ...) {                                        \
        static int (*real)(const char*, int, ...);                               \
        atomic_fetch_add_explicit(&g_calls[k_##name], 1, memory_order_relaxed); \
        if (!real) real = (int (*)(const char*, int, ...))next_fn(#name);        \
        va_list ap;                                                              \
        va_start(ap, f);                                                         \
        mode_t m = va_arg(ap, mode_t);                                           \
        va_end(ap);                                                              \
        return real(p, f, m);                                                    \
    }
#define FORWARD_VA3(name, a0type)                                                \
    int name(a0type d, const char* p, int f, ...) {                              \
        static int (*real)(a0type, const char*, int, ...);                       \
        atomic_fetch_add_explicit(&g_calls[k_##name], 1, memory_order_relaxed); \
        if (!real) real = (int (*)(a0type, const char*, int, ...))next_fn(#name);\
        va_list ap;                                                              \
        va_start(ap, f);                                                         \
        mode_t m = va_arg(ap, mode_t);                                           \
        va_end(ap);                                                              \
        return real(d, p, f, m);                                                 \
    }
FORWARD_VA2(open)
FORWARD_VA2(open64)
FORWARD_VA3(openat, int)
FORWARD_VA3(openat64, int)

#define FORWARD_FCNTL(name)                                                      \
    int name(int fd, int cmd, ...) {                                             \
        static int (*real)(int, int, ...);                                       \
        atomic_fetch_add_explicit(&g_calls[k_##name], 1, memory_order_relaxed); \
        if (!real) real = (int (*)(int, int, ...))next_fn(#name);                \
        va_list ap;                                                              \
        va_start(ap, cmd);                                                       \
        void* arg = va_arg(ap, void*);                                           \
        va_end(ap);                                                              \
        return real(fd, cmd, arg);                                               \
    }
FORWARD_FCNTL(fcntl)
FORWARD_FCNTL(fcntl64)

// The first syscall(2) call since the reset: its number and caller, for the report.
static atomic_long g_first_nr = -1;
static void* _Atomic g_first_caller;

long syscall(long nr, ...) {
    static long (*real)(long, ...);
    if (atomic_fetch_add_explicit(&g_calls[k_syscall], 1, memory_order_relaxed) == 0) {
        atomic_store(&g_first_caller, __builtin_return_address(0));
        atomic_store(&g_first_nr, nr);
    }
    if (!real) real = (long (*)(long, ...))next_fn("syscall");
    va_list ap;
    va_start(ap, nr);
    long a[6];
    for (int i = 0; i < 6; ++i) a[i] = va_arg(ap, long);
    va_end(ap);
    return real(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

void interposed_reset(void) {
    for (int i = 0; i < k_count; ++i) atomic_store(&g_calls[i], 0);
    atomic_store(&g_first_nr, -1);
    atomic_store(&g_first_caller, NULL);
}

unsigned long interposed_total(char* report, size_t n) {
    unsigned long total = 0;
    size_t used = 0;
    if (n) report[0] = '\0';
    for (int i = 0; i < k_count; ++i) {
        unsigned long c = atomic_load(&g_calls[i]);
        total += c;
        if (c && used < n) {
            int w = snprintf(report + used, n - used, "%s%s=%lu", used ? " " : "", k_names[i], c);
            if (w > 0) used += (size_t)w;
        }
        if (c && i == k_syscall && used < n) {  // which one, and who called it
            Dl_info info = {0};
            void* at = atomic_load(&g_first_caller);
            const char* in = dladdr(at, &info) && info.dli_sname ? info.dli_sname : "?";
            const char* obj = info.dli_fname ? info.dli_fname : "?";
            long off = info.dli_fbase ? (long)((char*)at - (char*)info.dli_fbase) : 0;
            int w = snprintf(report + used, n - used, " (first: number %ld, called from %s+%#lx in %s)",
                             atomic_load(&g_first_nr), obj, off, in);
            if (w > 0) used += (size_t)w;
        }
    }
    return total;
}
