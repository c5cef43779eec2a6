// The POSIX facade: libc's blocking I/O functions with their exact signatures and results (-1 and
// errno on failure), that park only the calling fiber. For ported code that expects POSIX, and
// what libgluon_preload.so's fiber mode runs unmodified programs on (docs/preload.md).
//
// Contract shared by every function here:
// - On a vCPU, a call that has to wait parks the calling fiber; the vCPU runs other fibers.
//   Outside a vCPU it is the plain system call and blocks the thread, as libc's would.
// - errno is set on the calling thread right before returning (never across a park), so the
//   value the caller reads is its own call's even if other fibers ran meanwhile.
// - An fd the caller made non-blocking (SOCK_NONBLOCK, O_NONBLOCK through posix::fcntl or
//   before first use here, MSG_DONTWAIT) keeps non-blocking semantics: EAGAIN, EINPROGRESS.
//   The epoll engine makes fds O_NONBLOCK in the kernel; posix::fcntl(F_GETFL) reports what
//   the caller asked for.
// - An interrupted fiber (fiber::interrupt) gets EINTR, as a signal would give a thread.
// - send, sendto, sendmsg and sendfile never raise SIGPIPE (MSG_NOSIGNAL is added; sendfile
//   blocks it around the call): a closed peer is EPIPE. write and writev to a socket whose
//   peer is gone raise it, as POSIX says (ignore SIGPIPE or use send where that matters).
// Errors: those of the system call of the same name, and EINTR as above.
#pragma once

#include <netdb.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

namespace gluon::posix {

// ---- sockets ------------------------------------------------------------------------------------
int socket(int domain, int type, int protocol) noexcept;
int bind(int fd, const sockaddr* addr, socklen_t len) noexcept;
int listen(int fd, int backlog) noexcept;
int accept(int fd, sockaddr* addr, socklen_t* len) noexcept;
int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) noexcept;
/// On a blocking socket, waits for the handshake, or for room in a Unix listener's full
/// backlog (tried again after pauses, as gluon::fd::connect); on a non-blocking one,
/// EINPROGRESS (EAGAIN: a Unix listener's full backlog).
int connect(int fd, const sockaddr* addr, socklen_t len) noexcept;
int shutdown(int fd, int how) noexcept;
/// setsockopt(2). SO_RCVTIMEO and SO_SNDTIMEO also bound this facade's own waits on fd, as the
/// kernel's would bound a blocking call: a receive (read, recv*, accept) or a send (write,
/// send*) that waits longer fails with EAGAIN, a connect with EINPROGRESS (a Unix socket's with
/// EAGAIN, as the kernel's). An error the kernel reports to the call is the call's as it is,
/// ETIMEDOUT included (the kernel gave up on the connection: TCP_USER_TIMEOUT, keepalive, SYN
/// retries), even one the vCPU takes in after the limit ran out: the kernel reports it only once.
int setsockopt(int fd, int level, int name, const void* value, socklen_t len) noexcept;

// ---- transfers ----------------------------------------------------------------------------------
ssize_t read(int fd, void* buf, size_t n) noexcept;
ssize_t write(int fd, const void* buf, size_t n) noexcept;
ssize_t readv(int fd, const iovec* iov, int iovcnt) noexcept;
ssize_t writev(int fd, const iovec* iov, int iovcnt) noexcept;
ssize_t pread(int fd, void* buf, size_t n, off_t off) noexcept;
ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) noexcept;
ssize_t preadv(int fd, const iovec* iov, int iovcnt, off_t off) noexcept;
ssize_t pwritev(int fd, const iovec* iov, int iovcnt, off_t off) noexcept;
ssize_t send(int fd, const void* buf, size_t n, int flags) noexcept;
ssize_t sendto(int fd, const void* buf, size_t n, int flags, const sockaddr* to, socklen_t tolen) noexcept;
ssize_t sendmsg(int fd, const msghdr* msg, int flags) noexcept;
ssize_t recv(int fd, void* buf, size_t n, int flags) noexcept;
ssize_t recvfrom(int fd, void* buf, size_t n, int flags, sockaddr* from, socklen_t* fromlen) noexcept;
ssize_t recvmsg(int fd, msghdr* msg, int flags) noexcept;
/// off == nullptr: from in_fd's file position, which advances.
ssize_t sendfile(int out_fd, int in_fd, off_t* off, size_t count) noexcept;

// ---- waiting ------------------------------------------------------------------------------------
int poll(pollfd* fds, nfds_t nfds, int timeout_ms) noexcept;
/// As Linux's: the time left is written back into *timeout (zero when it ran out), and an nfds
/// beyond FD_SETSIZE is cut to the process's fd table, not refused (the sets are read up to it:
/// sets larger than fd_set work, as does nfds = getdtablesize() with plain ones).
int select(int nfds, fd_set* readfds, fd_set* writefds, fd_set* exceptfds, timeval* timeout) noexcept;
/// Parks until epfd (an epoll instance) has events or timeout_ms passes.
int epoll_wait(int epfd, epoll_event* events, int maxevents, int timeout_ms) noexcept;
/// Interrupted: -1, EINTR, the time left in *rem (if given); off a vCPU a signal handler's run
/// interrupts it, as libc's (SA_RESTART does not restart it). A request beyond about 285 years
/// (tv_sec = LONG_MAX: "for ever") sleeps that long instead of overflowing into no sleep.
int nanosleep(const timespec* req, timespec* rem) noexcept;
int usleep(useconds_t usec) noexcept;
/// Returns the seconds left if interrupted, else 0.
unsigned sleep(unsigned seconds) noexcept;

// ---- files and descriptors ----------------------------------------------------------------------
/// Fails the operations other fibers of the calling vCPU still wait for on fd with EBADF (a
/// poll of fd reports POLLNVAL, as Linux's), then closes it. A fiber waiting on fd on another
/// vCPU goes on waiting, as a thread blocked on an fd another thread closes does in Linux:
/// shutdown(2) a socket first to end its waits everywhere.
int close(int fd) noexcept;
/// What close() does before close(2), for an fd the caller closes another way (fclose, a
/// library's own close): its waiters on the calling vCPU fail with EBADF, and the facade forgets
/// what it kept for the number (O_NONBLOCK, SO_RCVTIMEO/SO_SNDTIMEO), so that the next file to
/// get it starts afresh instead of acting on this one's.
void closing(int fd) noexcept;
/// close_range(2) (closefrom: last = ~0U), each fd closed as close() would. With
/// CLOSE_RANGE_CLOEXEC the fds stay open and keep their state.
int close_range(unsigned first, unsigned last, int flags) noexcept;
int fsync(int fd) noexcept;
int fdatasync(int fd) noexcept;
/// F_GETFL reports O_NONBLOCK as the caller set it; F_SETFL records it (per fd number, not per
/// open file as the kernel's flag: a change through one number is not seen through another
/// that a dup made); F_DUPFD and
/// F_DUPFD_CLOEXEC are dup(). Other commands take an integer argument and go to the kernel as
/// they are.
int fcntl(int fd, int cmd, ...) noexcept;
/// ioctl(2). FIONBIO (an int* argument: non-zero sets) is the caller's O_NONBLOCK, as fcntl
/// F_SETFL records it (programs and OpenSSL's BIO_socket_nbio set it this way); other requests
/// go to the kernel as they are.
int ioctl(int fd, unsigned long request, ...) noexcept;
/// The new number gets fd's O_NONBLOCK as the caller set it and its SO_RCVTIMEO/SO_SNDTIMEO
/// (which the facade keeps per number).
int dup(int fd) noexcept;
/// As dup, onto `to`: `to` is first closed as close() would (operations waiting on it on the
/// calling vCPU fail with EBADF), and then has from's state, nothing of the file it named before.
int dup2(int from, int to) noexcept;
int dup3(int from, int to, int flags) noexcept;

// ---- names --------------------------------------------------------------------------------------
/// getaddrinfo(3) run on the offload pool (it may read files and wait for DNS). Returns 0 or an
/// EAI_* code like getaddrinfo; free the list with freeaddrinfo(3).
int getaddrinfo(const char* node, const char* service, const addrinfo* hints, addrinfo** res) noexcept;

}  // namespace gluon::posix
