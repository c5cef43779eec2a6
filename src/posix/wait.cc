// Waiting in the POSIX facade: poll, select, epoll_wait, the sleeps, and getaddrinfo.
#include <fcntl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>

#include "fd_state.h"
#include "gluon/common/clock.h"
#include "gluon/posix.h"
#include "gluon/runtime/fd.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/runtime.h"
#include "gluon/runtime/vcpu.h"
#include "gluon/sys/ops.h"
#include "gluon/sys/proc.h"

namespace gluon::posix {
namespace {

using detail::set_errno;

deadline_t deadline_ms(int timeout_ms) {
    return timeout_ms < 0 ? k_no_deadline : deadline_after(std::chrono::milliseconds(timeout_ms));
}

timespec to_timespec(int ms) { return {ms / 1000, (ms % 1000) * 1'000'000L}; }

// The longest wait a timeout is taken for: about 285 years. More seconds would overflow the
// nanoseconds of a duration (a "sleep for ever" idiom such as tv_sec = LONG_MAX then came out
// negative and returned at once); a wait this long is for ever in practice.
constexpr time_t k_longest_wait_s = 9'000'000'000;

// A valid (non-negative) seconds and sub-second count as a duration, capped at the longest wait.
duration wait_of(time_t sec, duration sub) {
    if (sec >= k_longest_wait_s) return std::chrono::seconds(k_longest_wait_s);
    return std::chrono::seconds(sec) + sub;
}

timespec timespec_of(duration d) {
    const int64_t ns = d.count();
    return {static_cast<time_t>(ns / 1'000'000'000), static_cast<long>(ns % 1'000'000'000)};
}

// The events an engine's poll operation waits for; the others (POLLRDNORM, POLLWRNORM and the
// band events, which the kernel may report without POLLIN or POLLOUT) only an epoll instance.
constexpr short k_engine_events = POLLIN | POLLOUT | POLLPRI | POLLRDHUP;

// Parks until one of fds may be ready or the deadline passes (-ETIMEDOUT). One fd: a poll
// operation on it. Several, or one with other events: a temporary epoll instance holding them
// all, waited on as one fd (fds it refuses, regular files, are always ready, which the caller's
// first check saw). An fd listed in several entries, as poll allows, is watched for the events
// of them all (which entry got what is the kernel's poll's answer, read after the wake-up).
long wait_any(const pollfd* fds, nfds_t n, deadline_t d) {
    if (n == 1 && fds[0].fd >= 0 && (fds[0].events & ~k_engine_events) == 0) {
        auto op = engine::io_op::poll(fds[0].fd, fds[0].events);
        return run_op(op, d);
    }
    long ep = sys::epoll_create(EPOLL_CLOEXEC);
    if (ep < 0) return ep;
    const int epfd = static_cast<int>(ep);
    // (epoll takes poll's bits as they are. Without the NORM and BAND ones, an entry asking for
    // POLLRDNORM alone was watched for nothing and its poll slept to the timeout.)
    constexpr uint32_t k_watched = EPOLLIN | EPOLLOUT | EPOLLPRI | EPOLLRDHUP | EPOLLRDNORM | EPOLLRDBAND |
                                   EPOLLWRNORM | EPOLLWRBAND;
    int added = 0;
    for (nfds_t i = 0; i < n; ++i) {
        if (fds[i].fd < 0) continue;
        epoll_event ev{};
        ev.events = static_cast<uint32_t>(fds[i].events) & k_watched;
        long a = sys::epoll_ctl(epfd, EPOLL_CTL_ADD, fds[i].fd, &ev);
        if (a == -EEXIST) {
            // An earlier entry added this fd: watch it for the events of every entry so far.
            // (The search runs only for repeated fds, so the common case stays linear.)
            for (nfds_t j = 0; j < i; ++j)
                if (fds[j].fd == fds[i].fd) ev.events |= static_cast<uint32_t>(fds[j].events) & k_watched;
            a = sys::epoll_ctl(epfd, EPOLL_CTL_MOD, fds[i].fd, &ev);
        }
        added += a == 0;
    }
    long r;
    if (added == 0) {
        auto s = this_fiber::sleep_until(d);
        r = s ? -ETIMEDOUT : -s.error().value();
    } else {
        auto op = engine::io_op::poll(epfd, POLLIN);
        r = run_op(op, d);
    }
    (void)fd::close(epfd);
    return r;
}

// fd_set bits by hand: a set may be larger than fd_set (nfds beyond FD_SETSIZE), which FD_ISSET
// and FD_SET refuse under _FORTIFY_SOURCE.
bool has(const fd_set* set, int fd) noexcept {
    return set && (reinterpret_cast<const __fd_mask*>(set)[fd / NFDBITS] >> (fd % NFDBITS)) & 1;
}
void add(fd_set* set, int fd) noexcept { reinterpret_cast<__fd_mask*>(set)[fd / NFDBITS] |= __fd_mask{1} << (fd % NFDBITS); }
// Clears the words holding fds below nfds, as Linux writes them back (the rest is left alone).
void clear_below(fd_set* set, int nfds) noexcept {
    if (set) std::memset(set, 0, static_cast<size_t>((nfds + NFDBITS - 1) / NFDBITS) * sizeof(__fd_mask));
}

// poll until deadline d (k_no_deadline: no limit; wait false: one look, whatever d is), as
// -errno or the number of entries with events. Errors: those of ppoll(2), EINTR for an
// interrupted fiber.
long poll_until(pollfd* fds, nfds_t n, deadline_t d, bool wait) {
    timespec zero{};
    if (!is_vcpu()) {
        if (!wait) return sys::ppoll(fds, n, &zero);
        if (d == k_no_deadline) return sys::ppoll(fds, n, nullptr);
        timespec left = timespec_of(time_left(d));
        return sys::ppoll(fds, n, &left);
    }
    for (;;) {
        long r = sys::ppoll(fds, n, &zero);
        if (r != 0 || !wait) return r;
        long w = wait_any(fds, n, d);
        if (w == -ETIMEDOUT) return sys::ppoll(fds, n, &zero);
        // EBADF: a fiber of this vCPU closed the fd waited on (close fails its waiters); the
        // next look reports it as POLLNVAL, as Linux's poll does, instead of failing the call.
        if (w < 0 && w != -EBADF) return w;
    }
}

}  // namespace

int poll(pollfd* fds, nfds_t n, int timeout_ms) noexcept {
    return static_cast<int>(set_errno(poll_until(fds, n, deadline_ms(timeout_ms), timeout_ms != 0)));
}

int select(int nfds, fd_set* rd, fd_set* wr, fd_set* ex, timeval* timeout) noexcept {
    if (nfds < 0) return static_cast<int>(set_errno(-EINVAL));
    if (timeout && (timeout->tv_sec < 0 || timeout->tv_usec < 0)) return static_cast<int>(set_errno(-EINVAL));
    // Linux cuts nfds to its fd table's size instead of refusing it: programs pass
    // getdtablesize() (RLIMIT_NOFILE, a million in containers) with plain fd_sets, or sets made
    // larger than fd_set for fds beyond FD_SETSIZE. Both failed here with EINVAL.
    // (Linux's select reads and writes the sets only below its fd table's size.)
    if (nfds > FD_SETSIZE) nfds = std::min(nfds, detail::fd_table_size());
    auto events_of = [&](int fd) {
        short ev = 0;
        if (has(rd, fd)) ev |= POLLIN;
        if (has(wr, fd)) ev |= POLLOUT;
        if (has(ex, fd)) ev |= POLLPRI;
        return ev;
    };
    // A fiber's stack may be 16 KiB: FD_SETSIZE pollfds (8 KiB) go on the heap, a few on the stack.
    nfds_t n = 0;
    for (int fd = 0; fd < nfds; ++fd) n += events_of(fd) != 0;
    constexpr nfds_t k_on_stack = 32;
    pollfd few[k_on_stack];
    std::unique_ptr<pollfd[]> many;
    if (n > k_on_stack) {
        many.reset(new (std::nothrow) pollfd[n]);
        if (!many) return static_cast<int>(set_errno(-ENOMEM));
    }
    pollfd* pfds = many ? many.get() : few;
    n = 0;
    for (int fd = 0; fd < nfds; ++fd)
        if (short ev = events_of(fd)) pfds[n++] = {fd, ev, 0};
    // (A deadline, not poll's int milliseconds: tv_sec * 1000 overflowed an int beyond 24 days.)
    deadline_t d = k_no_deadline;
    if (timeout) d = deadline_after(wait_of(timeout->tv_sec, std::chrono::microseconds(timeout->tv_usec)));
    const long polled = poll_until(pfds, n, d, !timeout || timeout->tv_sec != 0 || timeout->tv_usec != 0);
    // Linux writes the time left back into the timeout, whatever the outcome; programs that
    // loop on one timeval to keep an overall deadline rely on it (a timeout beyond the cap
    // comes back as if the cap had been asked).
    if (timeout) {
        const auto left = std::chrono::duration_cast<std::chrono::microseconds>(time_left(d)).count();
        timeout->tv_sec = static_cast<time_t>(left / 1'000'000);
        timeout->tv_usec = static_cast<suseconds_t>(left % 1'000'000);
    }
    const int r = static_cast<int>(set_errno(polled));
    if (r < 0) return r;
    for (nfds_t i = 0; i < n; ++i)
        if (pfds[i].revents & POLLNVAL) return static_cast<int>(set_errno(-EBADF));
    for (fd_set* set : {rd, wr, ex}) clear_below(set, nfds);
    int count = 0;
    for (nfds_t i = 0; i < n; ++i) {
        const short re = pfds[i].revents;
        const short ev = pfds[i].events;
        if ((ev & POLLIN) && (re & (POLLIN | POLLHUP | POLLERR))) add(rd, pfds[i].fd), ++count;
        if ((ev & POLLOUT) && (re & (POLLOUT | POLLERR))) add(wr, pfds[i].fd), ++count;
        if ((ev & POLLPRI) && (re & POLLPRI)) add(ex, pfds[i].fd), ++count;
    }
    return count;
}

int epoll_wait(int epfd, epoll_event* events, int maxevents, int timeout_ms) noexcept {
    if (!is_vcpu()) {
        timespec ts = to_timespec(timeout_ms);
        return static_cast<int>(set_errno(sys::epoll_wait(epfd, events, maxevents, timeout_ms < 0 ? nullptr : &ts)));
    }
    const deadline_t d = deadline_ms(timeout_ms);
    for (;;) {
        timespec zero{};
        long r = sys::epoll_wait(epfd, events, maxevents, &zero);
        if (r != 0 || timeout_ms == 0) return static_cast<int>(set_errno(r));
        auto op = engine::io_op::poll(epfd, POLLIN);
        long w = run_op(op, d);
        if (w == -ETIMEDOUT) return static_cast<int>(set_errno(sys::epoll_wait(epfd, events, maxevents, &zero)));
        if (w < 0) return static_cast<int>(set_errno(w));
    }
}

int nanosleep(const timespec* req, timespec* rem) noexcept {
    if (!req || req->tv_nsec < 0 || req->tv_nsec >= 1'000'000'000L || req->tv_sec < 0)
        return static_cast<int>(set_errno(-EINVAL));
    const deadline_t end = deadline_after(wait_of(req->tv_sec, std::chrono::nanoseconds(req->tv_nsec)));
    if (!is_vcpu()) {
        // A plain thread sleeps in the kernel, once: a signal handler's run ends the sleep with
        // EINTR, as libc's nanosleep (never restarted, SA_RESTART or not). this_fiber::sleep_until
        // sleeps on through signals, so a main thread waiting for SIGTERM's handler slept its
        // whole time out.
        const timespec at{static_cast<time_t>(end / 1'000'000'000), static_cast<long>(end % 1'000'000'000)};
        const long s = sys::sleep_until_mono(&at);
        if (s == -EINTR && rem) *rem = timespec_of(time_left(end));
        return static_cast<int>(set_errno(s));
    }
    auto r = this_fiber::sleep_until(end);
    if (r) return 0;
    if (rem) *rem = timespec_of(time_left(end));
    return static_cast<int>(set_errno(-r.error().value()));
}

int usleep(useconds_t usec) noexcept {
    timespec ts{static_cast<time_t>(usec / 1'000'000), static_cast<long>(usec % 1'000'000) * 1000};
    return posix::nanosleep(&ts, nullptr);
}

unsigned sleep(unsigned seconds) noexcept {
    timespec ts{static_cast<time_t>(seconds), 0};
    timespec rem{};
    if (posix::nanosleep(&ts, &rem) == 0) return 0;
    return static_cast<unsigned>(rem.tv_sec + (rem.tv_nsec > 0));
}

int getaddrinfo(const char* node, const char* service, const addrinfo* hints, addrinfo** res) noexcept {
    if (!is_vcpu()) return ::getaddrinfo(node, service, hints, res);
    int saved = 0;
    int r = offload_call([&] {
        int rc = ::getaddrinfo(node, service, hints, res);
        saved = errno;  // EAI_SYSTEM's errno lives on the offload thread
        return rc;
    });
    if (r == EAI_SYSTEM) errno = saved;
    return r;
}

}  // namespace gluon::posix
