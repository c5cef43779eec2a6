// Waiting in the POSIX facade: poll, select, epoll_wait, the sleeps, and getaddrinfo.
#include <cerrno>
#include <chrono>
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

namespace gluon::posix {
namespace {

using detail::set_errno;

deadline_t deadline_ms(int timeout_ms) {
    return timeout_ms < 0 ? k_no_deadline : deadline_after(std::chrono::milliseconds(timeout_ms));
}

timespec to_timespec(int ms) { return {ms / 1000, (ms % 1000) * 1'000'000L}; }

// Parks until one of fds may be ready or the deadline passes (-ETIMEDOUT). One fd: a poll
// operation on it. Several: a temporary epoll instance holding them all, waited on as one fd
// (fds it refuses, regular files, are always ready, which the caller's first check saw).
long wait_any(const pollfd* fds, nfds_t n, deadline_t d) {
    if (n == 1 && fds[0].fd >= 0) {
        auto op = engine::io_op::poll(fds[0].fd, fds[0].events);
        return run_op(op, d);
    }
    long ep = sys::epoll_create(EPOLL_CLOEXEC);
    if (ep < 0) return ep;
    const int epfd = static_cast<int>(ep);
    int added = 0;
    for (nfds_t i = 0; i < n; ++i) {
        if (fds[i].fd < 0) continue;
        epoll_event ev{};
        ev.events = static_cast<uint32_t>(fds[i].events) & (EPOLLIN | EPOLLOUT | EPOLLPRI | EPOLLRDHUP);
        added += sys::epoll_ctl(epfd, EPOLL_CTL_ADD, fds[i].fd, &ev) == 0;
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

}  // namespace

int poll(pollfd* fds, nfds_t n, int timeout_ms) noexcept {
    if (!is_vcpu()) {
        timespec ts = to_timespec(timeout_ms);
        return static_cast<int>(set_errno(sys::ppoll(fds, n, timeout_ms < 0 ? nullptr : &ts)));
    }
    const deadline_t d = deadline_ms(timeout_ms);
    for (;;) {
        timespec zero{};
        long r = sys::ppoll(fds, n, &zero);
        if (r != 0 || timeout_ms == 0) return static_cast<int>(set_errno(r));
        long w = wait_any(fds, n, d);
        if (w == -ETIMEDOUT) return static_cast<int>(set_errno(sys::ppoll(fds, n, &zero)));
        if (w < 0) return static_cast<int>(set_errno(w));
    }
}

int select(int nfds, fd_set* rd, fd_set* wr, fd_set* ex, timeval* timeout) noexcept {
    if (nfds < 0 || nfds > FD_SETSIZE) return static_cast<int>(set_errno(-EINVAL));
    if (timeout && (timeout->tv_sec < 0 || timeout->tv_usec < 0)) return static_cast<int>(set_errno(-EINVAL));
    auto events_of = [&](int fd) {
        short ev = 0;
        if (rd && FD_ISSET(fd, rd)) ev |= POLLIN;
        if (wr && FD_ISSET(fd, wr)) ev |= POLLOUT;
        if (ex && FD_ISSET(fd, ex)) ev |= POLLPRI;
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
    int ms = -1;
    if (timeout) ms = static_cast<int>(timeout->tv_sec * 1000 + (timeout->tv_usec + 999) / 1000);
    int r = posix::poll(pfds, n, ms);
    if (r < 0) return r;
    for (nfds_t i = 0; i < n; ++i)
        if (pfds[i].revents & POLLNVAL) return static_cast<int>(set_errno(-EBADF));
    if (rd) FD_ZERO(rd);
    if (wr) FD_ZERO(wr);
    if (ex) FD_ZERO(ex);
    int count = 0;
    for (nfds_t i = 0; i < n; ++i) {
        const short re = pfds[i].revents;
        const short ev = pfds[i].events;
        if ((ev & POLLIN) && (re & (POLLIN | POLLHUP | POLLERR))) FD_SET(pfds[i].fd, rd), ++count;
        if ((ev & POLLOUT) && (re & (POLLOUT | POLLERR))) FD_SET(pfds[i].fd, wr), ++count;
        if ((ev & POLLPRI) && (re & POLLPRI)) FD_SET(pfds[i].fd, ex), ++count;
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
    const duration want = std::chrono::seconds(req->tv_sec) + std::chrono::nanoseconds(req->tv_nsec);
    const deadline_t end = deadline_after(want);
    auto r = this_fiber::sleep_until(end);
    if (r) return 0;
    if (rem) {
        const int64_t left = time_left(end).count();
        rem->tv_sec = static_cast<time_t>(left / 1'000'000'000);
        rem->tv_nsec = static_cast<long>(left % 1'000'000'000);
    }
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
