#include "gluon/net/socket.h"

#include <netinet/in.h>
#include <netinet/tcp.h>

#include <cstring>

#include "gluon/runtime/fd.h"
#include "gluon/sys/ops.h"

namespace gluon::net {
namespace {

result<int> new_socket(int family, int type) {
    return from_syscall<int>(sys::socket(family, type | SOCK_CLOEXEC, 0));
}

result<address> sock_name(int fd, bool peer) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    long r = peer ? sys::getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len)
                  : sys::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    if (r < 0) return errno_error(static_cast<int>(-r));
    return address::from(reinterpret_cast<sockaddr*>(&ss), len);
}

}  // namespace

socket_fd& socket_fd::operator=(socket_fd&& o) noexcept {
    if (this != &o) {
        (void)close();
        fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
}

result<void> socket_fd::close() noexcept {
    if (fd_ < 0) return {};
    return fd::close(std::exchange(fd_, -1));
}

result<address> socket_fd::local_address() const { return sock_name(fd_, false); }
result<address> socket_fd::peer_address() const { return sock_name(fd_, true); }

result<void> socket_fd::set_option(int level, int name, int value) noexcept {
    return void_from_syscall(sys::setsockopt(fd_, level, name, &value, sizeof value));
}

result<int> socket_fd::get_option(int level, int name) const noexcept {
    int v = 0;
    socklen_t len = sizeof v;
    if (long r = sys::getsockopt(fd_, level, name, &v, &len); r < 0) return errno_error(static_cast<int>(-r));
    return v;
}

// ---- stream -----------------------------------------------------------------------------

result<stream> stream::connect(const address& addr, duration timeout) {
    auto fd = GLUON_TRY(new_socket(addr.family(), SOCK_STREAM));
    stream s(fd);
    GLUON_TRY(fd::connect(s.get(), addr.data(), addr.size(), timeout));
    if (addr.family() != AF_UNIX) (void)s.set_nodelay(true);
    return s;
}

result<std::pair<stream, stream>> stream::pair() {
    int sv[2];
    GLUON_TRY(void_from_syscall(sys::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)));
    return std::pair<stream, stream>(stream(sv[0]), stream(sv[1]));
}

result<size_t> stream::do_read_some(void* buf, size_t n, duration t) {
    return ahead_ ? fd::recv_ahead(fd_, buf, n, t) : fd::recv_some(fd_, buf, n, 0, t);
}
result<size_t> stream::do_write_some(const void* buf, size_t n, duration t) {
    return fd::send_some(fd_, buf, n, 0, t);
}
result<size_t> stream::do_readv(const iovec* iov, int n, duration t) {
    // Read ahead: byte_stream's readv, into the first buffer with room through do_read_some.
    return ahead_ ? byte_stream::do_readv(iov, n, t) : fd::readv(fd_, iov, n, t);
}
// sendmsg rather than writev: MSG_NOSIGNAL, so a peer that is gone is EPIPE, never SIGPIPE.
// One buffer goes out with send(2): the kernel then copies no msghdr and imports no iovec.
result<size_t> stream::do_writev(const iovec* iov, int n, duration t) {
    if (n == 1) return fd::send_some(fd_, iov->iov_base, iov->iov_len, 0, t);
    msghdr msg{};
    msg.msg_iov = const_cast<iovec*>(iov);
    msg.msg_iovlen = static_cast<size_t>(n);
    return fd::sendmsg(fd_, &msg, 0, t);
}
result<void> stream::do_shutdown(duration) { return shutdown(SHUT_WR); }

result<void> stream::write_all_zerocopy(const void* buf, size_t n, duration timeout) noexcept {
    return fd::send_all_zerocopy(fd_, buf, n, timeout);
}

result<void> stream::do_send_file(int file_fd, int64_t off, size_t n, step_timeouts& t) {
    while (n > 0) {
        const duration left = t.next();
        if (left.count() == 0) return errno_error(ETIMEDOUT);
        auto r = GLUON_TRY(fd::sendfile(fd_, file_fd, off, n, left));
        if (r == 0) return errno_error(ENODATA);
        off += static_cast<int64_t>(r);
        n -= r;
    }
    return {};
}

result<void> stream::shutdown(int how) noexcept { return void_from_syscall(sys::shutdown(fd_, how)); }
result<void> stream::set_nodelay(bool on) noexcept { return set_option(IPPROTO_TCP, TCP_NODELAY, on); }
result<void> stream::set_keepalive(bool on) noexcept { return set_option(SOL_SOCKET, SO_KEEPALIVE, on); }

result<void> stream::set_buffer_sizes(int recv_bytes, int send_bytes) noexcept {
    if (recv_bytes > 0)
        if (auto r = set_option(SOL_SOCKET, SO_RCVBUF, recv_bytes); !r) return r;
    if (send_bytes > 0) return set_option(SOL_SOCKET, SO_SNDBUF, send_bytes);
    return {};
}

result<void> stream::set_linger(bool on, int seconds) noexcept {
    linger l{on ? 1 : 0, seconds};
    return void_from_syscall(sys::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l));
}

result<size_t> stream::send_fds(const void* buf, size_t n, std::span<const int> fds, duration t) noexcept {
    if (n == 0 || fds.size() > 253) return errno_error(EINVAL);
    iovec iov{const_cast<void*>(buf), n};
    alignas(cmsghdr) char ctl[CMSG_SPACE(253 * sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (!fds.empty()) {
        msg.msg_control = ctl;
        msg.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
        std::memcpy(CMSG_DATA(c), fds.data(), fds.size() * sizeof(int));
    }
    return fd::sendmsg(fd_, &msg, 0, t);
}

result<stream::received_fds> stream::recv_fds(void* buf, size_t n, std::span<int> fds,
                                              duration t) noexcept {
    iovec iov{buf, n};
    alignas(cmsghdr) char ctl[CMSG_SPACE(253 * sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl;
    msg.msg_controllen = sizeof ctl;
    auto r = GLUON_TRY(fd::recvmsg(fd_, &msg, MSG_CMSG_CLOEXEC, t));
    // The bytes are taken from the stream whatever happened to the fds: they are returned even
    // when fds were cut off, or the caller could not find where its stream resumes.
    received_fds out{r, 0, (msg.msg_flags & MSG_CTRUNC) != 0};  // the kernel closed the rest
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; ++i) {
            int passed;
            std::memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof passed);
            if (out.fds < fds.size()) {
                fds[out.fds++] = passed;
            } else {
                (void)sys::close(passed);  // no room: never leak an fd we were given
                out.truncated = true;
            }
        }
    }
    return out;
}

// ---- listener ---------------------------------------------------------------------------

result<listener> listener::listen(const address& addr, const listen_options& opts) {
    auto fd = GLUON_TRY(new_socket(addr.family(), SOCK_STREAM));
    listener l(fd);
    if (addr.family() != AF_UNIX) {
        if (opts.reuse_address) (void)l.set_option(SOL_SOCKET, SO_REUSEADDR, 1);
        if (opts.reuse_port)
            GLUON_TRY(l.set_option(SOL_SOCKET, SO_REUSEPORT, 1));
        // Accepted connections inherit it from the listener: listen_options::nodelay then holds
        // for every accept, not only for those of a net::server (which set it on each).
        if (opts.nodelay) (void)l.set_option(IPPROTO_TCP, TCP_NODELAY, 1);
    }
    GLUON_TRY(void_from_syscall(sys::bind(l.get(), addr.data(), addr.size())));
    GLUON_TRY(void_from_syscall(sys::listen(l.get(), opts.backlog)));
    return l;
}

result<stream> listener::accept(duration t) noexcept {
    // The listener is ours: its accepts may share one multishot accept (io_op::shared_accept).
    auto op = engine::io_op::accept(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    op.shared_accept = true;
    const long c = run_op(op, deadline_after(t));
    if (c < 0) return errno_error(static_cast<int>(-c));
    return stream(static_cast<int>(c));
}

result<stream> listener::accept(address& peer, duration t) noexcept {
    // Through accept()'s shared accept, then the peer's address from the socket: an accept(2)
    // of its own would not see the connections io_uring's multishot accept (armed by an
    // accept() before) had taken from the kernel, and waited while one sat there. A connection
    // reset before its address could be read is skipped, as one that was gone in the backlog.
    const deadline_t d = deadline_after(t);
    for (;;) {
        auto s = GLUON_TRY(accept(time_left(d)));
        if (auto a = s.peer_address()) {
            peer = *a;
            return s;
        }
    }
}

// ---- datagram ---------------------------------------------------------------------------

result<datagram> datagram::open(int family) {
    auto fd = GLUON_TRY(new_socket(family, SOCK_DGRAM));
    return datagram(fd);
}

result<datagram> datagram::bind(const address& addr) {
    auto d = open(addr.family());
    if (!d) return d;
    GLUON_TRY(void_from_syscall(sys::bind(d->get(), addr.data(), addr.size())));
    return d;
}

result<size_t> datagram::send_to(const void* buf, size_t n, const address& to, duration t) noexcept {
    iovec iov{const_cast<void*>(buf), n};
    msghdr msg{};
    msg.msg_name = const_cast<sockaddr*>(to.data());
    msg.msg_namelen = to.size();
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    return fd::sendmsg(fd_, &msg, 0, t);
}

result<size_t> datagram::recv_from(void* buf, size_t n, address& from, duration t) noexcept {
    sockaddr_storage ss{};
    iovec iov{buf, n};
    msghdr msg{};
    msg.msg_name = &ss;
    msg.msg_namelen = sizeof ss;
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    auto r = fd::recvmsg(fd_, &msg, 0, t);
    if (!r) return r;
    from = address::from(reinterpret_cast<sockaddr*>(&ss), msg.msg_namelen);
    return r;
}

}  // namespace gluon::net
