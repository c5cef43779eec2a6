// Sockets, transfers and descriptors of the POSIX facade.
#include "gluon/posix.h"

#include <fcntl.h>
#include <linux/close_range.h>

#include <cerrno>
#include <algorithm>
#include <cstdarg>
#include <cstdint>

#include "fd_state.h"
#include "gluon/engine/engine.h"
#include "gluon/runtime/fd.h"
#include "gluon/runtime/vcpu.h"
#include "gluon/sys/ops.h"
#include "gluon/sys/proc.h"

namespace gluon::posix {
namespace {

using detail::nonblocking;
using detail::set_errno;
using engine::io_op;
using engine::opcode;

// The caller's SO_RCVTIMEO (input) or SO_SNDTIMEO (output) on fd, as a deadline from now.
deadline_t limit_deadline(int fd, short events) noexcept {
    const duration d = detail::wait_limit(fd, events);
    return d > duration::zero() ? deadline_after(d) : k_no_deadline;
}

// True if an operation's -ETIMEDOUT is its SO_RCVTIMEO/SO_SNDTIMEO deadline passing (the park's
// timer cancelled it), not the kernel's (a TCP user timeout, keepalive or SYN retries running
// out), which must reach the caller as it is: the kernel hands its error out once, so one read
// as the limit's was lost, and the next call saw only the connection's end. The clock cannot
// tell them apart: the kernel's can be taken in, or its fiber run, after the deadline.
bool limit_ran_out(long r, const io_op& op) noexcept {
    return r == -ETIMEDOUT && op.cancel_errno == ETIMEDOUT;
}

// poll(2)'s timeout until d (-1: no deadline); 0 once it has passed.
int poll_timeout(deadline_t d) noexcept {
    if (d == k_no_deadline) return -1;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(time_left(d));
    return left <= duration::zero() ? 0 : static_cast<int>(std::min<int64_t>(left.count() + 1, INT32_MAX));
}

// One operation on fd: through the engine (parking the fiber) when on a vCPU and the caller
// wants to wait; otherwise the system call itself. A thread that is not a vCPU and finds
// EAGAIN on an fd it wants blocking (the epoll engine made it O_NONBLOCK) waits in poll(2).
// The wait is bounded by the socket's SO_RCVTIMEO (input) or SO_SNDTIMEO (output) as the
// caller set it; when it runs out the call fails with EAGAIN, as the kernel's does (any error the
// kernel reports, ETIMEDOUT included, is the call's).
template <typename Direct>
long run(int fd, bool dontwait, short events, io_op op, Direct direct) noexcept {
    const bool wait = !dontwait && !nonblocking(fd);
    const deadline_t deadline = wait ? limit_deadline(fd, events) : k_no_deadline;
    if (wait && is_vcpu()) {
        const long r = run_op(op, deadline);
        return limit_ran_out(r, op) ? -EAGAIN : r;
    }
    for (;;) {
        long r = direct();
        if (r != -EAGAIN || !wait) return r;
        const int ms = poll_timeout(deadline);
        if (ms == 0) return -EAGAIN;  // the timeout ran out
        if (long p = sys::poll1(fd, events, ms); p < 0) return p;
    }
}

long transfer(opcode c, int fd, void* buf, size_t n, int64_t off, int flags, short events, auto direct) {
    return run(fd, flags & MSG_DONTWAIT, events, io_op::transfer(c, fd, buf, n, off, flags), direct);
}

}  // namespace

int socket(int domain, int type, int protocol) noexcept {
    long fd = sys::socket(domain, type, protocol);
    // (A new file: nothing of what the number named before, which a close the facade did not
    // see may have left, not even whether it was seekable.)
    if (fd >= 0) {
        detail::forget(static_cast<int>(fd));
        detail::set_nonblocking(static_cast<int>(fd), type & SOCK_NONBLOCK);
    }
    return static_cast<int>(set_errno(fd));
}

int setsockopt(int fd, int level, int name, const void* value, socklen_t len) noexcept {
    long r = sys::setsockopt(fd, level, name, value, len);
    if (r == 0 && level == SOL_SOCKET && (name == SO_RCVTIMEO || name == SO_SNDTIMEO) && len >= sizeof(timeval)) {
        const auto* tv = static_cast<const timeval*>(value);
        detail::set_wait_limit(fd, name == SO_RCVTIMEO, std::chrono::seconds(tv->tv_sec) + std::chrono::microseconds(tv->tv_usec));
    }
    return static_cast<int>(set_errno(r));
}

int bind(int fd, const sockaddr* a, socklen_t l) noexcept { return static_cast<int>(set_errno(sys::bind(fd, a, l))); }
int listen(int fd, int backlog) noexcept { return static_cast<int>(set_errno(sys::listen(fd, backlog))); }
int shutdown(int fd, int how) noexcept { return static_cast<int>(set_errno(sys::shutdown(fd, how))); }

int accept(int fd, sockaddr* addr, socklen_t* len) noexcept { return posix::accept4(fd, addr, len, 0); }

int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) noexcept {
    long r = run(fd, false, POLLIN, io_op::accept(fd, addr, len, flags),
                 [&] { return sys::accept(fd, addr, len, flags); });
    if (r >= 0) {
        detail::forget(static_cast<int>(r));  // (a new file, as socket's)
        detail::set_nonblocking(static_cast<int>(r), flags & SOCK_NONBLOCK);
        // An accepted socket has its listener's timeouts, as in the kernel.
        for (bool receive : {true, false})
            if (duration d = detail::wait_limit(fd, receive ? POLLIN : POLLOUT); d > duration::zero())
                detail::set_wait_limit(static_cast<int>(r), receive, d);
    }
    return static_cast<int>(set_errno(r));
}

int connect(int fd, const sockaddr* addr, socklen_t len) noexcept {
    if (nonblocking(fd)) return static_cast<int>(set_errno(sys::connect(fd, addr, len)));
    const deadline_t deadline = limit_deadline(fd, POLLOUT);
    if (is_vcpu()) {
        // A Unix listener's full backlog is waited out (run_connect), as a blocking connect(2)
        // waits; -EAGAIN from it is SO_SNDTIMEO running out with the backlog still full.
        auto op = io_op::connect(fd, addr, len);
        long r = run_connect(op, deadline);
        // SO_SNDTIMEO ran out during an attempt: the kernel's answers, EAGAIN for a Unix socket.
        if (limit_ran_out(r, op)) r = addr->sa_family == AF_UNIX ? -EAGAIN : -EINPROGRESS;
        return static_cast<int>(set_errno(r));
    }
    long r = sys::connect(fd, addr, len);
    if (r == -EINPROGRESS) {  // blocking for the caller, O_NONBLOCK in the kernel
        r = sys::poll1(fd, POLLOUT, poll_timeout(deadline));
        if (r == 0) return static_cast<int>(set_errno(-EINPROGRESS));  // SO_SNDTIMEO ran out
        if (r >= 0) r = sys::socket_error(fd);
    }
    return static_cast<int>(set_errno(r));
}

ssize_t read(int fd, void* buf, size_t n) noexcept {
    return set_errno(transfer(opcode::read, fd, buf, n, -1, 0, POLLIN, [&] { return sys::read(fd, buf, n, -1); }));
}

ssize_t write(int fd, const void* buf, size_t n) noexcept {
    void* b = const_cast<void*>(buf);
    return set_errno(transfer(opcode::write, fd, b, n, -1, 0, POLLOUT, [&] { return sys::write(fd, buf, n, -1); }));
}

ssize_t readv(int fd, const iovec* iov, int cnt) noexcept {
    return set_errno(run(fd, false, POLLIN, io_op::vectored(opcode::readv, fd, iov, cnt),
                         [&] { return sys::readv(fd, iov, cnt, -1); }));
}

ssize_t writev(int fd, const iovec* iov, int cnt) noexcept {
    return set_errno(run(fd, false, POLLOUT, io_op::vectored(opcode::writev, fd, iov, cnt),
                         [&] { return sys::writev(fd, iov, cnt, -1); }));
}

ssize_t pread(int fd, void* buf, size_t n, off_t off) noexcept {
    if (off < 0) return set_errno(-EINVAL);
    if (!detail::seekable(fd)) return set_errno(-ESPIPE);
    return set_errno(transfer(opcode::read, fd, buf, n, off, 0, POLLIN, [&] { return sys::read(fd, buf, n, off); }));
}

ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) noexcept {
    if (off < 0) return set_errno(-EINVAL);
    if (!detail::seekable(fd)) return set_errno(-ESPIPE);
    void* b = const_cast<void*>(buf);
    return set_errno(transfer(opcode::write, fd, b, n, off, 0, POLLOUT, [&] { return sys::write(fd, buf, n, off); }));
}

ssize_t preadv(int fd, const iovec* iov, int cnt, off_t off) noexcept {
    if (off < 0) return set_errno(-EINVAL);
    if (!detail::seekable(fd)) return set_errno(-ESPIPE);
    return set_errno(run(fd, false, POLLIN, io_op::vectored(opcode::readv, fd, iov, cnt, off),
                         [&] { return sys::readv(fd, iov, cnt, off); }));
}

ssize_t pwritev(int fd, const iovec* iov, int cnt, off_t off) noexcept {
    if (off < 0) return set_errno(-EINVAL);
    if (!detail::seekable(fd)) return set_errno(-ESPIPE);
    return set_errno(run(fd, false, POLLOUT, io_op::vectored(opcode::writev, fd, iov, cnt, off),
                         [&] { return sys::writev(fd, iov, cnt, off); }));
}

ssize_t send(int fd, const void* buf, size_t n, int flags) noexcept {
    flags |= MSG_NOSIGNAL;
    void* b = const_cast<void*>(buf);
    return set_errno(transfer(opcode::send, fd, b, n, -1, flags, POLLOUT, [&] { return sys::send(fd, buf, n, flags); }));
}

ssize_t recv(int fd, void* buf, size_t n, int flags) noexcept {
    return set_errno(transfer(opcode::recv, fd, buf, n, -1, flags, POLLIN, [&] { return sys::recv(fd, buf, n, flags); }));
}

ssize_t sendmsg(int fd, const msghdr* msg, int flags) noexcept {
    flags |= MSG_NOSIGNAL;
    auto* m = const_cast<msghdr*>(msg);
    return set_errno(run(fd, flags & MSG_DONTWAIT, POLLOUT, io_op::message(opcode::sendmsg, fd, m, flags),
                         [&] { return sys::sendmsg(fd, msg, flags); }));
}

ssize_t recvmsg(int fd, msghdr* msg, int flags) noexcept {
    return set_errno(run(fd, flags & MSG_DONTWAIT, POLLIN, io_op::message(opcode::recvmsg, fd, msg, flags),
                         [&] { return sys::recvmsg(fd, msg, flags); }));
}

ssize_t sendto(int fd, const void* buf, size_t n, int flags, const sockaddr* to, socklen_t tolen) noexcept {
    if (!to) return posix::send(fd, buf, n, flags);
    iovec v{const_cast<void*>(buf), n};
    msghdr m{};
    m.msg_name = const_cast<sockaddr*>(to);
    m.msg_namelen = tolen;
    m.msg_iov = &v;
    m.msg_iovlen = 1;
    return posix::sendmsg(fd, &m, flags);
}

ssize_t recvfrom(int fd, void* buf, size_t n, int flags, sockaddr* from, socklen_t* fromlen) noexcept {
    if (!from || !fromlen) return posix::recv(fd, buf, n, flags);
    iovec v{buf, n};
    msghdr m{};
    m.msg_name = from;
    m.msg_namelen = *fromlen;
    m.msg_iov = &v;
    m.msg_iovlen = 1;
    ssize_t r = posix::recvmsg(fd, &m, flags);
    if (r >= 0) *fromlen = m.msg_namelen;
    return r;
}

ssize_t sendfile(int out_fd, int in_fd, off_t* off, size_t count) noexcept {
    int64_t pos = off ? *off : sys::lseek(in_fd, 0, SEEK_CUR);
    if (pos < 0) return set_errno(pos);
    long r;
    if (is_vcpu() && !nonblocking(out_fd)) {
        auto n = fd::sendfile(out_fd, in_fd, pos, count);
        r = n ? static_cast<long>(*n) : -n.error().value();
    } else {
        int64_t o = pos;
        r = sys::without_sigpipe([&] { return sys::sendfile(out_fd, in_fd, &o, count); });
    }
    if (r > 0) {
        if (off) *off = static_cast<off_t>(pos + r);
        else (void)sys::lseek(in_fd, pos + r, SEEK_SET);
    }
    return set_errno(r);
}

int close(int fd) noexcept {
    detail::forget(fd);
    auto r = fd::close(fd);
    return static_cast<int>(set_errno(r ? 0 : -r.error().value()));
}

void closing(int fd) noexcept {
    detail::forget(fd);
    fd::closing(fd);
}

int close_range(unsigned first, unsigned last, int flags) noexcept {
    // (Only below the fd table's size: no fd above it is open, and closefrom's ~0U would take
    // billions of numbers.)
    if (!(flags & CLOSE_RANGE_CLOEXEC) && first <= last) {
        const unsigned end = std::min(last, static_cast<unsigned>(detail::fd_table_size()) - 1);
        for (unsigned fd = first; fd <= end; ++fd) posix::closing(static_cast<int>(fd));
    }
    return static_cast<int>(set_errno(sys::close_range(first, last, flags)));
}

int dup(int fd) noexcept { return posix::fcntl(fd, F_DUPFD, 0); }

int dup2(int from, int to) noexcept {
    if (from == to) {  // (dup2 leaves a valid fd as it is; dup3 refuses this)
        const long v = sys::fcntl(from, F_GETFD);
        return static_cast<int>(set_errno(v < 0 ? v : to));
    }
    return posix::dup3(from, to, 0);
}

int dup3(int from, int to, int flags) noexcept {
    // What close() does for the number replaced, only once the call cannot fail on its
    // arguments (its waiters must not get EBADF from a dup3 that did nothing).
    if (from != to && to >= 0 && (flags & ~O_CLOEXEC) == 0 && sys::fcntl(from, F_GETFD) >= 0) fd::closing(to);
    const uint8_t s = detail::state_of(from);
    const long r = sys::dup3(from, to, flags);
    if (r >= 0) detail::copy_state(s, from, to);
    return static_cast<int>(set_errno(r));
}

int fsync(int fd) noexcept {
    if (!is_vcpu()) return static_cast<int>(set_errno(sys::fsync(fd, false)));
    auto r = fd::fsync(fd, false);
    return static_cast<int>(set_errno(r ? 0 : -r.error().value()));
}

int fdatasync(int fd) noexcept {
    if (!is_vcpu()) return static_cast<int>(set_errno(sys::fsync(fd, true)));
    auto r = fd::fsync(fd, true);
    return static_cast<int>(set_errno(r ? 0 : -r.error().value()));
}

int fcntl(int fd, int cmd, ...) noexcept {
    va_list ap;
    va_start(ap, cmd);
    long arg = va_arg(ap, long);
    va_end(ap);
    if (cmd == F_GETFL) {
        const bool nb = nonblocking(fd);
        long r = sys::fcntl(fd, F_GETFL);
        if (r >= 0) r = nb ? (r | O_NONBLOCK) : (r & ~long{O_NONBLOCK});
        return static_cast<int>(set_errno(r));
    }
    if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) {
        const uint8_t s = detail::state_of(fd);
        const long r = sys::fcntl(fd, cmd, arg);
        if (r >= 0) detail::copy_state(s, fd, static_cast<int>(r));
        return static_cast<int>(set_errno(r));
    }
    if (cmd == F_SETFL) {
        // The epoll engine needs O_NONBLOCK on every fd it waits on: the one it set stays, or a
        // wait would block the vCPU. io_uring waits on blocking fds itself, so there (and only
        // there: off a vCPU the engine is unknown) the program's flag reaches the kernel as
        // given, and a child sharing the open file sees what the program asked for.
        long keep = 0;
        engine::engine* e = is_vcpu() ? current_engine() : nullptr;
        if (!e || e->type() != engine::kind::io_uring) {
            long cur = sys::fcntl(fd, F_GETFL);
            if (cur < 0) return static_cast<int>(set_errno(cur));
            keep = cur & O_NONBLOCK;
        }
        long r = sys::fcntl(fd, F_SETFL, arg | keep);
        if (r >= 0) detail::set_nonblocking(fd, arg & O_NONBLOCK);
        return static_cast<int>(set_errno(r));
    }
    return static_cast<int>(set_errno(sys::fcntl(fd, cmd, arg)));
}

int ioctl(int fd, unsigned long request, ...) noexcept {
    va_list ap;
    va_start(ap, request);
    void* arg = va_arg(ap, void*);
    va_end(ap);
    if (request != FIONBIO) return static_cast<int>(set_errno(sys::ioctl(fd, request, arg)));
    // What F_SETFL does with O_NONBLOCK (the flag the epoll engine set stays in the kernel). Set
    // behind the facade's back, the socket stayed blocking here: a call on it parked the fiber
    // (or waited in poll off a vCPU) where the program expected EAGAIN.
    if (!arg) return static_cast<int>(set_errno(-EFAULT));
    const long fl = sys::fcntl(fd, F_GETFL);
    if (fl < 0) return static_cast<int>(set_errno(fl));
    const bool on = *static_cast<const int*>(arg) != 0;
    return posix::fcntl(fd, F_SETFL, on ? (fl | O_NONBLOCK) : (fl & ~long{O_NONBLOCK}));
}

}  // namespace gluon::posix
