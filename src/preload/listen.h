// Listener mode's pieces (listen.cc), called by the interposers in io.cc when
// GLUON_PRELOAD=listen. Results are a value or -errno. Private to src/preload.
#pragma once

#include <poll.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>

namespace gluon::preload::listen {

/// Before the program binds a TCP socket: sets SO_REUSEPORT, so that workers' listeners can join
/// its port, and maps the state the processes it forks share. Errors: none (a socket it cannot
/// prepare is bound as it is, and its workers accept from it as without the preload).
void before_bind(int fd) noexcept;
/// The program made fd a listening socket (only those get workers' listeners). Errors: none.
void listening(int fd) noexcept;
/// epoll_ctl as asked; when a worker adds a listening socket, also makes the worker's own
/// listener and gives it the same events and data. Errors: the kernel's for the program's fd.
long epoll_ctl(int ep, int op, int fd, epoll_event* ev) noexcept;
/// poll as asked; an entry waiting for input on a program's listening socket also watches the
/// calling worker's own listener (made on first use), whose input shows as the entry's
/// POLLIN. Errors: the kernel's.
long poll(pollfd* fds, nfds_t n, int timeout_ms) noexcept;
/// select, the same way for a read set holding a program's listening socket (watched through
/// poll; the timeout is then left as it was, as POSIX allows). Any other is Linux's select,
/// which writes the time left back into the timeout. Errors: the kernel's, EINVAL.
long select(int nfds, fd_set* rd, fd_set* wr, fd_set* ex, timeval* timeout) noexcept;
/// accept4 from the worker's own listener, then from the program's socket. Errors: the
/// kernel's (EAGAIN when both are empty).
long accept4(int fd, sockaddr* addr, socklen_t* len, int flags) noexcept;
/// The program closes fd: its worker listener (if any) goes too. Errors: none.
void closing(int fd) noexcept;

}  // namespace gluon::preload::listen
