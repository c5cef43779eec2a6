// libgluon_preload.so's mode and its I/O interposers: in fiber mode the I/O, waits and sleeps of
// gluon::posix (which park the calling fiber), fork refused once threads run as fibers, and the
// one-time warning for calls that still block a whole vCPU (docs/preload.md; the blocking calls
// without an asynchronous form are in blocking.cc).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

#include "gluon/posix.h"
#include "gluon/runtime/fiber.h"
#include "listen.h"
#include "preload.h"

namespace gluon::preload {
namespace {

mode read_mode() {
    const char* m = std::getenv("GLUON_PRELOAD");
    if (!m || !*m) return mode::off;
    if (std::strcmp(m, "fibers") == 0) return mode::fibers;
    if (std::strcmp(m, "listen") == 0) return mode::listen;
    std::fprintf(stderr, "gluon preload: GLUON_PRELOAD=%s is not a mode (fibers, listen); running the program as it is\n", m);
    return mode::off;
}

const mode g_mode = read_mode();

// True when a call made now should go to gluon: fiber mode, from anywhere (off a vCPU the
// facade is the plain system call, so the program's main thread keeps libc's behaviour).
// (Not inside a signal handler: there the async-signal-safe calls are libc's, signals.cc.)
bool on() { return g_mode == mode::fibers && !in_signal_handler(); }

}  // namespace

mode current_mode() noexcept { return g_mode; }

bool program_fiber() noexcept { return on() && is_vcpu() && program_context(); }

void note_vcpu_blocking(const char* name) noexcept {
    static std::set<std::string>* seen = new std::set<std::string>;
    static std::mutex mu;
    internal_scope s;  // the std::mutex is libc's here
    std::lock_guard lk(mu);
    if (seen->insert(name).second)
        std::fprintf(stderr, "gluon preload: %s() is not intercepted and blocks the whole vCPU it runs on "
                             "(every fiber there waits); see docs/preload.md\n", name);
}

}  // namespace gluon::preload

using namespace gluon::preload;
namespace px = gluon::posix;

// A -errno result as libc gives it: -1 with errno set.
static long with_errno(long r) {
    if (r >= 0) return r;
    errno = static_cast<int>(-r);
    return -1;
}

#define GLUON_FORWARD(fn, ...) \
    (on() ? keep_errno([&] { return px::fn(__VA_ARGS__); }) : GLUON_REAL(fn)(__VA_ARGS__))

extern "C" {

int socket(int d, int t, int p) noexcept { return GLUON_FORWARD(socket, d, t, p); }
int accept(int fd, sockaddr* a, socklen_t* l) {
    if (g_mode == mode::listen) return static_cast<int>(with_errno(listen::accept4(fd, a, l, 0)));
    return GLUON_FORWARD(accept, fd, a, l);
}
int accept4(int fd, sockaddr* a, socklen_t* l, int f) {
    if (g_mode == mode::listen) return static_cast<int>(with_errno(listen::accept4(fd, a, l, f)));
    return GLUON_FORWARD(accept4, fd, a, l, f);
}
int bind(int fd, const sockaddr* a, socklen_t l) noexcept {
    if (g_mode == mode::listen) listen::before_bind(fd);
    return GLUON_REAL(bind)(fd, a, l);
}
int listen(int fd, int backlog) noexcept {
    const int r = GLUON_REAL(listen)(fd, backlog);
    if (r == 0 && g_mode == mode::listen) listen::listening(fd);
    return r;
}
int epoll_ctl(int ep, int op, int fd, epoll_event* ev) noexcept {
    if (g_mode != mode::listen) return GLUON_REAL(epoll_ctl)(ep, op, fd, ev);
    return static_cast<int>(with_errno(listen::epoll_ctl(ep, op, fd, ev)));
}
int connect(int fd, const sockaddr* a, socklen_t l) { return GLUON_FORWARD(connect, fd, a, l); }
int setsockopt(int fd, int level, int name, const void* v, socklen_t l) noexcept {
    return GLUON_FORWARD(setsockopt, fd, level, name, v, l);
}
ssize_t read(int fd, void* b, size_t n) { return GLUON_FORWARD(read, fd, b, n); }
ssize_t write(int fd, const void* b, size_t n) { return GLUON_FORWARD(write, fd, b, n); }
ssize_t readv(int fd, const iovec* v, int c) { return GLUON_FORWARD(readv, fd, v, c); }
ssize_t writev(int fd, const iovec* v, int c) { return GLUON_FORWARD(writev, fd, v, c); }
ssize_t pread(int fd, void* b, size_t n, off_t o) { return GLUON_FORWARD(pread, fd, b, n, o); }
ssize_t pwrite(int fd, const void* b, size_t n, off_t o) { return GLUON_FORWARD(pwrite, fd, b, n, o); }
ssize_t pread64(int fd, void* b, size_t n, off_t o) { return GLUON_FORWARD(pread, fd, b, n, o); }
ssize_t pwrite64(int fd, const void* b, size_t n, off_t o) { return GLUON_FORWARD(pwrite, fd, b, n, o); }
ssize_t preadv(int fd, const iovec* v, int c, off_t o) { return GLUON_FORWARD(preadv, fd, v, c, o); }
ssize_t pwritev(int fd, const iovec* v, int c, off_t o) { return GLUON_FORWARD(pwritev, fd, v, c, o); }
ssize_t preadv64(int fd, const iovec* v, int c, off_t o) { return GLUON_FORWARD(preadv, fd, v, c, o); }
ssize_t pwritev64(int fd, const iovec* v, int c, off_t o) { return GLUON_FORWARD(pwritev, fd, v, c, o); }
ssize_t send(int fd, const void* b, size_t n, int f) { return GLUON_FORWARD(send, fd, b, n, f); }
ssize_t sendto(int fd, const void* b, size_t n, int f, const sockaddr* a, socklen_t l) {
    return GLUON_FORWARD(sendto, fd, b, n, f, a, l);
}
ssize_t sendmsg(int fd, const msghdr* m, int f) { return GLUON_FORWARD(sendmsg, fd, m, f); }
ssize_t recv(int fd, void* b, size_t n, int f) { return GLUON_FORWARD(recv, fd, b, n, f); }
ssize_t recvfrom(int fd, void* b, size_t n, int f, sockaddr* a, socklen_t* l) {
    return GLUON_FORWARD(recvfrom, fd, b, n, f, a, l);
}
ssize_t recvmsg(int fd, msghdr* m, int f) { return GLUON_FORWARD(recvmsg, fd, m, f); }
ssize_t sendfile(int o, int i, off_t* off, size_t n) noexcept { return GLUON_FORWARD(sendfile, o, i, off, n); }
ssize_t sendfile64(int o, int i, off_t* off, size_t n) noexcept { return GLUON_FORWARD(sendfile, o, i, off, n); }
int poll(pollfd* f, nfds_t n, int t) {
    if (g_mode == mode::listen) return static_cast<int>(with_errno(listen::poll(f, n, t)));
    return GLUON_FORWARD(poll, f, n, t);
}
int select(int n, fd_set* r, fd_set* w, fd_set* e, timeval* t) {
    if (g_mode == mode::listen) return static_cast<int>(with_errno(listen::select(n, r, w, e, t)));
    return GLUON_FORWARD(select, n, r, w, e, t);
}
int epoll_wait(int ep, epoll_event* e, int n, int t) { return GLUON_FORWARD(epoll_wait, ep, e, n, t); }
int close(int fd) {
    if (g_mode == mode::listen) listen::closing(fd);
    return GLUON_FORWARD(close, fd);
}
// Closes the facade does not see through close() (libc's closefrom calls the system call
// itself): each number is closed as close() would, or its O_NONBLOCK and timeouts stayed for
// the next file to get it (a blocking pipe taken for a non-blocking socket read at once, and
// blocked the vCPU).
int close_range(unsigned first, unsigned last, int flags) noexcept { return GLUON_FORWARD(close_range, first, last, flags); }
void closefrom(int low) noexcept {
    if (on() && low >= 0 && px::close_range(static_cast<unsigned>(low), ~0U, 0) == 0) return;
    GLUON_REAL(closefrom)(low);  // (close_range(2) failed: libc's fallback)
}
int fsync(int fd) { return GLUON_FORWARD(fsync, fd); }
int fdatasync(int fd) { return GLUON_FORWARD(fdatasync, fd); }
int nanosleep(const timespec* req, timespec* rem) { return GLUON_FORWARD(nanosleep, req, rem); }
int usleep(useconds_t us) { return GLUON_FORWARD(usleep, us); }
unsigned sleep(unsigned s) { return GLUON_FORWARD(sleep, s); }

// Returns an error number, not -1 (POSIX). An absolute time is turned into a relative sleep
// on the same clock, read now, in seconds and nanoseconds (a far time such as tv_sec =
// LONG_MAX overflowed a count of nanoseconds and became no sleep; nanosleep caps it).
int clock_nanosleep(clockid_t c, int flags, const timespec* t, timespec* rem) {
    if (!program_fiber()) return GLUON_REAL(clock_nanosleep)(c, flags, t, rem);
    if (!t || t->tv_nsec < 0 || t->tv_nsec >= 1'000'000'000L) return EINVAL;
    timespec rel = *t;
    if (flags & TIMER_ABSTIME) {
        timespec now;
        if (clock_gettime(c, &now) != 0) return EINVAL;
        time_t sec;
        long ns = t->tv_nsec - now.tv_nsec;
        if (__builtin_sub_overflow(t->tv_sec, now.tv_sec, &sec)) sec = t->tv_sec < 0 ? -1 : INT64_MAX;
        if (ns < 0) {
            ns += 1'000'000'000L;
            --sec;
        }
        rel = sec < 0 ? timespec{0, 0} : timespec{sec, ns};
    }
    const int saved = errno;
    const int r = px::nanosleep(&rel, (flags & TIMER_ABSTIME) ? nullptr : rem);
    const int err = r == 0 ? 0 : errno;
    errno = saved;
    return err;
}

// A new number for an open file takes its blocking state from the one it copies (a number
// dup2'ed over kept its previous file's: "non-blocking" made a recv on a blocking socket a
// blocking system call on the vCPU).
int dup(int fd) noexcept { return GLUON_FORWARD(dup, fd); }
int dup2(int from, int to) noexcept { return GLUON_FORWARD(dup2, from, to); }
int dup3(int from, int to, int flags) noexcept { return GLUON_FORWARD(dup3, from, to, flags); }

// `program`: a program fiber made the call (a waiting record lock then parks it instead of
// blocking the vCPU: it waits on the offload pool).
static int fcntl_any(const char* real_name, int fd, int cmd, long arg, bool program) {
    if (on() && (cmd == F_GETFL || cmd == F_SETFL || cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))
        return px::fcntl(fd, cmd, arg);
    static auto* real_fcntl = gluon::preload::real<int (*)(int, int, ...)>("fcntl");
    static auto* real_fcntl64 = gluon::preload::real<int (*)(int, int, ...)>("fcntl64");
    auto* f = std::strcmp(real_name, "fcntl64") == 0 && real_fcntl64 ? real_fcntl64 : real_fcntl;
    if (program && (cmd == F_SETLKW || cmd == F_OFD_SETLKW)) return gluon::preload::offloaded_fcntl(f, fd, cmd, arg);
    return f(fd, cmd, arg);  // every fcntl command's argument fits in a long
}
int fcntl(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    long arg = va_arg(ap, long);
    va_end(ap);
    return fcntl_any("fcntl", fd, cmd, arg, GLUON_PROGRAM_FIBER());
}
int fcntl64(int fd, int cmd, ...) {
    va_list ap;
    va_start(ap, cmd);
    long arg = va_arg(ap, long);
    va_end(ap);
    return fcntl_any("fcntl64", fd, cmd, arg, GLUON_PROGRAM_FIBER());
}

// FIONBIO is the program's O_NONBLOCK (as F_SETFL's); every other request is libc's.
int ioctl(int fd, unsigned long request, ...) noexcept {
    va_list ap;
    va_start(ap, request);
    void* arg = va_arg(ap, void*);
    va_end(ap);
    if (on() && request == FIONBIO) return keep_errno([&] { return px::ioctl(fd, request, arg); });
    return GLUON_REAL(ioctl)(fd, request, arg);
}

pid_t fork() {
    if (on() && started()) {
        std::fprintf(stderr, "gluon preload: fork() after pthread_create under GLUON_PRELOAD=fibers is refused: "
                             "the child would have none of the vCPUs its threads run on (fork before "
                             "creating threads, or run without the preload)\n");
        errno = ENOSYS;
        return -1;
    }
    return GLUON_REAL(fork)();
}

}  // extern "C"
