// Blocking-style operations on plain file descriptors that park only the calling fiber. They run
// on the vCPU's engine (io_uring natively, epoll by readiness) and are what the file, network
// and POSIX layers are built on. Every call takes an optional timeout (ETIMEDOUT; one of a
// second or more may end a few milliseconds late, see timeout_deadline in gluon/common/clock.h)
// and returns ECANCELED when the fiber is interrupted. Called outside a vCPU they fail with EPERM.
//
// The epoll engine makes an fd O_NONBLOCK on first use; close fds used here with fd::close so
// the engine forgets them.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/engine/engine.h"

namespace gluon {

/// Submits op to the calling vCPU's engine and parks until it completes, the deadline passes
/// (-ETIMEDOUT) or the fiber is interrupted (-ECANCELED). Returns the op's result or -errno.
long run_op(engine::io_op& op, deadline_t deadline = k_no_deadline) noexcept;
/// run_op on another engine owned by the calling vCPU's thread (a side ring driven through
/// its pollable_fd()); its completions must be dispatched on this thread, and its owner must
/// flush() it after queueing (so that one submission can carry many operations).
long run_op(engine::engine& eng, engine::io_op& op, deadline_t deadline = k_no_deadline) noexcept;
/// run_op for a connect (io_op::connect) that waits out a Unix listener's full backlog: its
/// EAGAIN, which no readiness event ends, is tried again after a pause of
/// fd::k_connect_pause_first, doubling up to fd::k_connect_pause_max, never past `deadline`
/// (a blocking socket on io_uring waits in the kernel instead). Returns 0 or -errno: -EAGAIN
/// once the deadline has passed with the backlog still full, -ECANCELED (an interrupt), or the
/// connect's own (ECONNREFUSED, ETIMEDOUT: the deadline passed during an attempt, ...).
long run_connect(engine::io_op& op, deadline_t deadline = k_no_deadline) noexcept;

namespace fd {

/// May be short. 0 means end of file. One call moves at most 0x7ffff000 bytes (as read(2),
/// write(2), recv(2) and send(2) do, on every engine): a longer one comes back short.
result<size_t> read_some(int fd, void* buf, size_t n, duration timeout = forever) noexcept;
result<size_t> write_some(int fd, const void* buf, size_t n, duration timeout = forever) noexcept;
result<size_t> pread(int fd, void* buf, size_t n, int64_t off, duration timeout = forever) noexcept;
result<size_t> pwrite(int fd, const void* buf, size_t n, int64_t off, duration timeout = forever) noexcept;
result<size_t> readv(int fd, const iovec* iov, int iovcnt, duration timeout = forever) noexcept;
result<size_t> writev(int fd, const iovec* iov, int iovcnt, duration timeout = forever) noexcept;
/// recv_some, send_some, recvmsg and sendmsg pass flags to the kernel, but MSG_DONTWAIT does not
/// keep them from waiting: where the kernel has nothing to take or no room (EAGAIN), the call
/// waits for readiness as without it, on every engine (which treat every fd as non-blocking
/// anyway). gluon::posix::recv, send, recvmsg and sendmsg honour it: EAGAIN instead of a wait.
result<size_t> recv_some(int fd, void* buf, size_t n, int flags = 0, duration timeout = forever) noexcept;
result<size_t> send_some(int fd, const void* buf, size_t n, int flags = 0, duration timeout = forever) noexcept;
/// recv_some for a socket read ahead: on io_uring, one multishot receive is kept armed on the
/// socket and takes data into the engine's buffers as it arrives; this call copies from there
/// (what it has no room for is kept for the next call). It saves the kernel a receive request,
/// and on an empty socket a poll, per message: for request/response connections. Every read
/// of fd must then be made this way, from one vCPU, and fd closed with fd::close on that vCPU
/// (the armed receive holds the socket open until then). On epoll it is recv_some.
/// Errors: those of recv_some.
result<size_t> recv_ahead(int fd, void* buf, size_t n, duration timeout = forever) noexcept;
result<size_t> recvmsg(int fd, msghdr* msg, int flags = 0, duration timeout = forever) noexcept;
result<size_t> sendmsg(int fd, const msghdr* msg, int flags = 0, duration timeout = forever) noexcept;
/// Returns the accepted fd (SOCK_CLOEXEC by default).
result<int> accept(int fd, sockaddr* addr = nullptr, socklen_t* addrlen = nullptr,
                   int flags = SOCK_CLOEXEC, duration timeout = forever) noexcept;
/// The pauses between the attempts of a connect to a Unix listener whose backlog is full (see
/// connect): the first, and the most one grows to by doubling.
inline constexpr duration k_connect_pause_first = std::chrono::milliseconds(1);
inline constexpr duration k_connect_pause_max = std::chrono::milliseconds(64);
/// Connects fd to addr. A Unix listener whose backlog is full (the kernel's EAGAIN, for which no
/// readiness event comes) is tried again after a pause, k_connect_pause_first doubling up to
/// k_connect_pause_max, until the connect gets in; the timeout bounds the whole call (run_connect).
/// Errors: those of connect(2) (ECONNREFUSED, ENOENT: no Unix listener at the path, ...),
/// ETIMEDOUT (a backlog still full at the timeout included), ECANCELED.
result<void> connect(int fd, const sockaddr* addr, socklen_t addrlen, duration timeout = forever) noexcept;
/// Waits until fd has any of `events` (POLLIN, POLLOUT, ...); returns the revents mask. A zero
/// timeout looks without waiting: at what the engine took ahead for fd, then with one ppoll(2).
/// Errors: ETIMEDOUT (nothing ready), ECANCELED (an interrupted wait), the kernel's.
result<short> poll(int fd, short events, duration timeout = forever) noexcept;
result<void> fsync(int fd, bool datasync = false) noexcept;
/// Fails every operation of the calling vCPU still waiting on fd with EBADF, then closes it.
/// Operations another vCPU has parked on fd are not ended: as with close(2) under a thread
/// blocked in read(2), they wait on until their timeout or interrupt (io_uring's requests keep
/// the file open, so its peer sees no end either; epoll's registration goes with the file, and a
/// wake-up still on its way with it). Stop them before the close, and wait for them to end:
/// interrupt their fibers, or shut a socket down (shutdown(2): its receives read the end of the
/// stream). Errors: those of close(2).
result<void> close(int fd) noexcept;
/// What close() does before close(2), for code that closes fd another way (file_io::close): drops
/// the calling vCPU's engine state for fd and marks the number closed for every other engine.
void closing(int fd) noexcept;

/// Sends up to n bytes of in_fd (a regular file) from offset off to the socket out_fd
/// (sendfile(2): no copy through user space). May be short; returns the bytes sent. out_fd is
/// made O_NONBLOCK (both engines handle such sockets). Reading the file may still wait for the
/// disk on the vCPU's thread: for cold files prefer reading through gluon::file_io. A peer
/// that is gone is EPIPE, never SIGPIPE (as send with MSG_NOSIGNAL).
/// Errors: those of sendfile(2) (EPIPE, ECONNRESET, EINVAL), ETIMEDOUT, ECANCELED.
result<size_t> sendfile(int out_fd, int in_fd, int64_t off, size_t n, duration timeout = forever) noexcept;
/// Moves up to n bytes from in_fd to out_fd where one of them is a pipe (splice(2)); 0 means
/// end of input. Sockets involved are made O_NONBLOCK. Never raises SIGPIPE (EPIPE instead).
/// Errors: those of splice(2), ETIMEDOUT, ECANCELED.
result<size_t> splice(int in_fd, int out_fd, size_t n, duration timeout = forever) noexcept;

/// Loops until all n bytes are written; a timeout applies to the whole call.
/// Errors: those of write_some; on error, nothing is known about how much was written.
result<void> write_all(int fd, const void* buf, size_t n, duration timeout = forever) noexcept;
/// Loops until n bytes are read. Errors: those of read_some, and ENODATA if the end of the file
/// or stream came first (gluon's end-of-stream error everywhere; EPIPE is only a write's).
result<void> read_exactly(int fd, void* buf, size_t n, duration timeout = forever) noexcept;
/// write_all / read_exactly for sockets, with send(2)/recv(2) semantics (MSG_NOSIGNAL).
result<void> send_all(int fd, const void* buf, size_t n, duration timeout = forever) noexcept;
result<void> recv_exactly(int fd, void* buf, size_t n, duration timeout = forever) noexcept;
/// send_all with zero-copy sends (io_uring SEND_ZC): the kernel sends from buf without copying
/// it and the call returns only when the kernel no longer reads buf. Pays off for large
/// buffers (tens of KiB and up) on real NICs; over loopback the kernel copies anyway, and on
/// the epoll engine this is a plain send_all.
result<void> send_all_zerocopy(int fd, const void* buf, size_t n, duration timeout = forever) noexcept;

}  // namespace fd
}  // namespace gluon
