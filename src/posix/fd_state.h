// What the caller of the POSIX facade asked of each fd: blocking or not. The epoll engine sets
// O_NONBLOCK in the kernel on every fd it waits on, so the kernel's flag cannot say whether
// the program wants EAGAIN; this table remembers it, from the first call that saw the fd, with
// whether the fd is seekable.
#pragma once

#include <cstdint>

#include "gluon/common/clock.h"

namespace gluon::posix::detail {

/// True if calls on fd should not wait (the caller set O_NONBLOCK). An fd seen here for the
/// first time is asked of the kernel (F_GETFL) before gluon changes its flags.
bool nonblocking(int fd) noexcept;
/// False for sockets, pipes and terminals (pread and friends fail with ESPIPE there; io_uring
/// would read them as streams). Learned with the same first look as nonblocking().
bool seekable(int fd) noexcept;
/// Records the caller's wish for fd (at socket, accept4, fcntl F_SETFL).
void set_nonblocking(int fd, bool on) noexcept;
/// SO_RCVTIMEO / SO_SNDTIMEO as the caller set them on fd (setsockopt): how long a receive
/// (POLLIN) or a send (POLLOUT) may wait; zero: without limit.
duration wait_limit(int fd, short events) noexcept;
void set_wait_limit(int fd, bool receive, duration d) noexcept;
/// Forgets fd (at close), so the next fd with its number is asked of the kernel again.
void forget(int fd) noexcept;
/// Gives `to`, a new number for from's open file (dup, dup2, dup3, F_DUPFD), from's state: the
/// caller's O_NONBLOCK wish and the wait limits. Asking the kernel instead would read the
/// O_NONBLOCK the epoll engine may have set on the shared file; keeping what the number had
/// before would make a reused number act on its previous file's wish (a recv on a blocking
/// socket dup2'ed over a non-blocking one then made a blocking system call on the vCPU).
/// `s` is from's state read before the duplicate was made: take it with state_of().
std::uint8_t state_of(int from) noexcept;
void copy_state(std::uint8_t s, int from, int to) noexcept;

/// The size of the process's fd table (the kernel's max_fds, FDSize in /proc/self/status): no
/// fd at or above it is open. FD_SETSIZE if it cannot be read.
int fd_table_size() noexcept;

/// Returns r, or -1 with errno = -r (ECANCELED, an interrupted fiber, becomes EINTR). The
/// last thing every facade function does.
long set_errno(long r) noexcept;

}  // namespace gluon::posix::detail
