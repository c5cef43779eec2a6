// Stream and datagram sockets (TCP, Unix) whose calls park only the calling fiber. Every
// blocking call takes an optional timeout (ETIMEDOUT) and returns ECANCELED when the fiber is
// interrupted. A connected stream socket is a byte_stream (gluon/net/byte_stream.h: the transfer
// calls, their names and errors, end of stream).
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <span>
#include <utility>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/net/address.h"
#include "gluon/net/byte_stream.h"

namespace gluon::net {

/// An owned socket fd; closed (through the engine, see gluon::fd::close) on destruction.
class socket_fd {
public:
    socket_fd() noexcept = default;
    explicit socket_fd(int fd) noexcept : fd_(fd) {}
    socket_fd(socket_fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
    socket_fd& operator=(socket_fd&& o) noexcept;
    socket_fd(const socket_fd&) = delete;
    socket_fd& operator=(const socket_fd&) = delete;
    ~socket_fd() { (void)close(); }

    int get() const noexcept { return fd_; }
    int release() noexcept { return std::exchange(fd_, -1); }
    bool valid() const noexcept { return fd_ >= 0; }
    /// Errors of close(2) (the fd is gone either way).
    result<void> close() noexcept;

    result<address> local_address() const;
    result<address> peer_address() const;
    /// setsockopt with an int value. Errors: those of setsockopt(2).
    result<void> set_option(int level, int name, int value) noexcept;
    result<int> get_option(int level, int name) const noexcept;

protected:
    int fd_ = -1;
};

/// A connected TCP or Unix stream socket. send_file uses sendfile(2): no copy through user space.
class stream final : public socket_fd, public byte_stream {
public:
    using socket_fd::socket_fd;
    stream(stream&&) noexcept = default;
    stream& operator=(stream&&) noexcept = default;
    /// Connects to addr (TCP or Unix). A Unix listener whose backlog is full is tried again
    /// after pauses until it has room or the timeout passes (fd::connect). Errors:
    /// ECONNREFUSED, ETIMEDOUT, ENETUNREACH, ENOENT (no Unix socket at the path), ECANCELED, ...
    static result<stream> connect(const address& addr, duration timeout = forever);
    /// A connected pair of Unix stream sockets.
    static result<std::pair<stream, stream>> pair();

    /// write_all with zero-copy sends where the engine has them (see fd::send_all_zerocopy).
    result<void> write_all_zerocopy(const void* buf, size_t n, duration timeout = forever) noexcept;
    using byte_stream::shutdown;
    /// SHUT_RD, SHUT_WR or SHUT_RDWR. Errors: ENOTCONN, EBADF.
    result<void> shutdown(int how) noexcept;
    /// Closes the socket. Errors: those of close(2) (the fd is gone either way).
    result<void> close() noexcept { return socket_fd::close(); }
    socket_fd* socket() noexcept override { return this; }

    result<void> set_nodelay(bool on = true) noexcept;
    result<void> set_keepalive(bool on = true) noexcept;
    result<void> set_buffer_sizes(int recv_bytes, int send_bytes) noexcept;
    /// linger on close for `seconds` (0: reset the connection on close).
    result<void> set_linger(bool on, int seconds) noexcept;

    /// Reads ahead (fd::recv_ahead): on io_uring one multishot receive stays armed on the
    /// socket and every read copies from what it took. For request/response connections with
    /// small messages. Every read must then go through this stream's read calls (not recv_fds,
    /// not fd:: calls on its fd), from one vCPU, and the stream be closed on that vCPU.
    void read_ahead(bool on = true) noexcept { ahead_ = on; }

    /// Unix sockets: sends data (at least one byte) with the given fds attached.
    result<size_t> send_fds(const void* buf, size_t n, std::span<const int> fds,
                            duration timeout = forever) noexcept;
    /// What recv_fds received.
    struct received_fds {
        size_t bytes = 0;        ///< data bytes read into buf (0: end of stream)
        size_t fds = 0;          ///< passed fds stored at the front of the span; the caller owns them
        bool truncated = false;  ///< the sender passed more fds than fit: the others are closed
    };
    /// Unix sockets: receives data and up to fds.size() passed fds (CLOEXEC). Fds beyond the
    /// span, or beyond what the kernel could pass (MSG_CTRUNC), are closed and reported as
    /// truncated; the data read is returned either way, so the stream loses nothing.
    /// Errors: those of recvmsg(2), ETIMEDOUT, ECANCELED.
    result<received_fds> recv_fds(void* buf, size_t n, std::span<int> fds,
                                  duration timeout = forever) noexcept;

private:
    result<size_t> do_read_some(void* buf, size_t n, duration timeout) override;
    result<size_t> do_write_some(const void* buf, size_t n, duration timeout) override;
    result<size_t> do_readv(const iovec* iov, int cnt, duration timeout) override;
    result<size_t> do_writev(const iovec* iov, int cnt, duration timeout) override;
    result<void> do_send_file(int file_fd, int64_t off, size_t n, step_timeouts& t) override;
    result<void> do_shutdown(duration timeout) override;
    result<void> do_close() noexcept override { return socket_fd::close(); }
    bool ahead_ = false;
};

struct listen_options {
    int backlog = 4096;
    bool reuse_address = true;
    bool reuse_port = false;
    /// TCP_NODELAY on accepted TCP connections (Nagle off: request/response traffic), set on
    /// the listener, from which every accepted connection inherits it.
    bool nodelay = true;
};

class listener : public socket_fd {
public:
    using socket_fd::socket_fd;
    /// Binds and listens (TCP, or Unix: an existing socket file at the path is not removed).
    static result<listener> listen(const address& addr, const listen_options& opts = {});
    /// On io_uring a listener's accepts share one multishot accept, which takes connections from
    /// the kernel as they come; a readiness poll of fd() still reports those. Errors:
    /// EMFILE/ENFILE (out of fds: back off and retry), ECANCELED, ETIMEDOUT.
    result<stream> accept(duration timeout = forever) noexcept;
    /// accept() that also gives the peer's address (read from the accepted socket). Errors:
    /// those of accept().
    result<stream> accept(address& peer, duration timeout = forever) noexcept;
};

/// UDP and Unix datagram sockets.
class datagram : public socket_fd {
public:
    using socket_fd::socket_fd;
    /// A socket bound to addr (port 0: any free port).
    static result<datagram> bind(const address& addr);
    /// An unbound socket of the given family (AF_INET, AF_INET6, AF_UNIX).
    static result<datagram> open(int family);
    result<size_t> send_to(const void* buf, size_t n, const address& to, duration timeout = forever) noexcept;
    /// Returns the datagram's size (truncated to n if larger: MSG_TRUNC is not an error).
    result<size_t> recv_from(void* buf, size_t n, address& from, duration timeout = forever) noexcept;
};

}  // namespace gluon::net
