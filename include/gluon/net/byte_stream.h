// byte_stream: the one type for a connected, ordered, reliable byte stream, whatever carries it
// (TCP or Unix socket: net::stream; TLS: net::tls::stream; later shared memory). Protocols (HTTP,
// RPC, ...) are written once against it, and a server hands each connection's handler one.
//
// Every blocking call parks only the calling fiber and takes a timeout for the whole call
// (ETIMEDOUT); an interrupted fiber gets ECANCELED. Names say whether a transfer may be short:
// *_some, readv and writev may be short; read_exactly, write_all and writev_all loop until done.
//
// End of stream is a read of 0 bytes for the *_some calls, and ENODATA for the calls that need
// more bytes than came (read_exactly). EPIPE means the other side is gone (or this side shut its
// writing down) and is only ever a write's error.
//
// The interface is virtual (ADR 0014 measures it against calling the socket directly): the concrete
// streams are final, so code that holds one by its own type calls it directly.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"

namespace gluon::net {

class socket_fd;

class byte_stream {
public:
    virtual ~byte_stream() = default;

    /// Reads up to n bytes (at least one unless n is 0); 0 means end of stream. Errors: ETIMEDOUT,
    /// ECANCELED, ECONNRESET, EBADF (closed), and the transport's own (tls::errc, ...).
    result<size_t> read_some(void* buf, size_t n, duration timeout = forever) {
        return do_read_some(buf, n, timeout);
    }
    /// Writes up to n bytes (at least one unless n is 0). Errors: EPIPE (the peer is gone or
    /// this side shut down), ECONNRESET, ETIMEDOUT, ECANCELED, EBADF, the transport's own.
    result<size_t> write_some(const void* buf, size_t n, duration timeout = forever) {
        return do_write_some(buf, n, timeout);
    }
    /// Scatter read; may fill fewer bytes than the buffers hold. Errors: those of read_some.
    result<size_t> readv(const iovec* iov, int cnt, duration timeout = forever) {
        return do_readv(iov, cnt, timeout);
    }
    /// Gather write; may be short. Errors: those of write_some, EINVAL (cnt < 0 or > IOV_MAX).
    result<size_t> writev(const iovec* iov, int cnt, duration timeout = forever) {
        return do_writev(iov, cnt, timeout);
    }
    /// Reads exactly n bytes. Errors: those of read_some, and ENODATA if the stream ended first
    /// (what was read is then in buf, but how much is not reported).
    result<void> read_exactly(void* buf, size_t n, duration timeout = forever);
    /// Writes all n bytes. Errors: those of write_some; on an error, how much was written is not
    /// known.
    result<void> write_all(const void* buf, size_t n, duration timeout = forever) {
        step_timeouts t(timeout);
        return write_all(buf, n, t);
    }
    /// write_all that fails only when a wait makes no progress for t.gap (ETIMEDOUT).
    result<void> write_all(const void* buf, size_t n, stall_timeout t) {
        step_timeouts s(t);
        return write_all(buf, n, s);
    }
    /// Writes every byte of the buffers (one system call when the transport takes them all at
    /// once: a response's header and body in one send). Errors: those of write_all, EINVAL.
    result<void> writev_all(const iovec* iov, int cnt, duration timeout = forever) {
        step_timeouts t(timeout);
        return writev_all(iov, cnt, t);
    }
    /// writev_all that fails only when a wait makes no progress for t.gap (ETIMEDOUT).
    result<void> writev_all(const iovec* iov, int cnt, stall_timeout t) {
        step_timeouts s(t);
        return writev_all(iov, cnt, s);
    }
    /// Sends n bytes of the regular file file_fd from offset off: without a copy through user
    /// space where the transport allows it (sendfile on a plain socket), else read and written
    /// in chunks. Errors: those of write_all, ENODATA (the file ended first), the file's read
    /// errors (EIO, EBADF, EINVAL).
    result<void> send_file(int file_fd, int64_t off, size_t n, duration timeout = forever) {
        step_timeouts t(timeout);
        return do_send_file(file_fd, off, n, t);
    }
    /// send_file that fails only when a wait makes no progress for t.gap (ETIMEDOUT).
    result<void> send_file(int file_fd, int64_t off, size_t n, stall_timeout t) {
        step_timeouts s(t);
        return do_send_file(file_fd, off, n, s);
    }
    /// Ends this side's writing (TCP FIN, TLS close_notify); reading goes on. Errors: those of
    /// write_some; ENOTCONN on a socket that is not connected.
    result<void> shutdown(duration timeout = forever) { return do_shutdown(timeout); }
    /// Releases the transport (closes the socket; a TLS stream sends nothing more). Further
    /// calls fail with EBADF. Errors: those of close(2) (the stream is closed either way).
    result<void> close() noexcept { return do_close(); }

    /// The socket underneath, if any: for addresses and socket options (reading or writing it
    /// directly bypasses the stream, and breaks a TLS session). nullptr for transports without one.
    virtual socket_fd* socket() noexcept { return nullptr; }

protected:
    byte_stream() = default;
    byte_stream(const byte_stream&) = default;
    byte_stream& operator=(const byte_stream&) = default;

    virtual result<size_t> do_read_some(void* buf, size_t n, duration timeout) = 0;
    virtual result<size_t> do_write_some(const void* buf, size_t n, duration timeout) = 0;
    /// Defaults: the first non-empty buffer only (correct, as the calls may be short).
    virtual result<size_t> do_readv(const iovec* iov, int cnt, duration timeout);
    virtual result<size_t> do_writev(const iovec* iov, int cnt, duration timeout);
    /// Default: pread into a buffer and write_all, 64 KiB at a time. Each wait takes t.next().
    virtual result<void> do_send_file(int file_fd, int64_t off, size_t n, step_timeouts& t);
    /// The loops of write_all and writev_all, each wait bounded by t.next().
    result<void> write_all(const void* buf, size_t n, step_timeouts& t);
    result<void> writev_all(const iovec* iov, int cnt, step_timeouts& t);
    virtual result<void> do_shutdown(duration timeout) = 0;
    virtual result<void> do_close() noexcept = 0;
};

}  // namespace gluon::net
