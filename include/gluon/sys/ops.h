// The syscall floor for files and sockets: thin wrappers that return the result or -errno,
// entering the kernel through sys/raw.h (never libc's wrappers; ADR 0013). Nothing here touches
// errno. Errors: whatever the kernel returns, as -errno.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <stdio.h>  // renameat2, for the libc path of sanitizer builds
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/ioctl.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>

#include "gluon/sys/raw.h"

namespace gluon::sys {

// ---- reads and writes (off < 0: at the current position) ---------------------------------------

inline long read(int fd, void* b, size_t n, int64_t off) noexcept {
    if (off < 0) return GLUON_SYSCALL(::read(fd, b, n), SYS_read, fd, b, n);
    return GLUON_SYSCALL(::pread(fd, b, n, off), SYS_pread64, fd, b, n, off);
}
inline long write(int fd, const void* b, size_t n, int64_t off) noexcept {
    if (off < 0) return GLUON_SYSCALL(::write(fd, b, n), SYS_write, fd, b, n);
    return GLUON_SYSCALL(::pwrite(fd, b, n, off), SYS_pwrite64, fd, b, n, off);
}
// The kernel's preadv family takes the offset as (low, high) words; on 64-bit the low word is
// all of it.
inline long readv(int fd, const iovec* v, int cnt, int64_t off) noexcept {
    if (off < 0) return GLUON_SYSCALL(::readv(fd, v, cnt), SYS_readv, fd, v, cnt);
    return GLUON_SYSCALL(::preadv(fd, v, cnt, off), SYS_preadv, fd, v, cnt, off, 0);
}
inline long writev(int fd, const iovec* v, int cnt, int64_t off) noexcept {
    if (off < 0) return GLUON_SYSCALL(::writev(fd, v, cnt), SYS_writev, fd, v, cnt);
    return GLUON_SYSCALL(::pwritev(fd, v, cnt, off), SYS_pwritev, fd, v, cnt, off, 0);
}
/// preadv2/pwritev2 with RWF_* flags (RWF_NOWAIT: only what the page cache holds).
inline long preadv2(int fd, const iovec* v, int cnt, int64_t off, int flags) noexcept {
    return GLUON_SYSCALL(::preadv2(fd, v, cnt, off, flags), SYS_preadv2, fd, v, cnt, off, 0, flags);
}
inline long pwritev2(int fd, const iovec* v, int cnt, int64_t off, int flags) noexcept {
    return GLUON_SYSCALL(::pwritev2(fd, v, cnt, off, flags), SYS_pwritev2, fd, v, cnt, off, 0, flags);
}
inline long sendfile(int out_fd, int in_fd, int64_t* off, size_t n) noexcept {
    static_assert(sizeof(off_t) == sizeof(int64_t));
    return GLUON_SYSCALL(::sendfile(out_fd, in_fd, reinterpret_cast<off_t*>(off), n), SYS_sendfile, out_fd,
                         in_fd, off, n);
}
inline long splice(int in_fd, int out_fd, size_t n, unsigned flags) noexcept {
    return GLUON_SYSCALL(::splice(in_fd, nullptr, out_fd, nullptr, n, flags), SYS_splice, in_fd, nullptr,
                         out_fd, nullptr, n, flags);
}

// ---- sockets ------------------------------------------------------------------------------------

inline long socket(int family, int type, int protocol) noexcept {
    return GLUON_SYSCALL(::socket(family, type, protocol), SYS_socket, family, type, protocol);
}
inline long socketpair(int family, int type, int protocol, int fds[2]) noexcept {
    return GLUON_SYSCALL(::socketpair(family, type, protocol, fds), SYS_socketpair, family, type, protocol, fds);
}
inline long bind(int fd, const sockaddr* a, socklen_t l) noexcept {
    return GLUON_SYSCALL(::bind(fd, a, l), SYS_bind, fd, a, l);
}
inline long listen(int fd, int backlog) noexcept { return GLUON_SYSCALL(::listen(fd, backlog), SYS_listen, fd, backlog); }
inline long shutdown(int fd, int how) noexcept { return GLUON_SYSCALL(::shutdown(fd, how), SYS_shutdown, fd, how); }
inline long recv(int fd, void* b, size_t n, int flags) noexcept {
    return GLUON_SYSCALL(::recv(fd, b, n, flags), SYS_recvfrom, fd, b, n, flags, nullptr, nullptr);
}
inline long send(int fd, const void* b, size_t n, int flags) noexcept {
    flags |= MSG_NOSIGNAL;
    return GLUON_SYSCALL(::send(fd, b, n, flags), SYS_sendto, fd, b, n, flags, nullptr, 0);
}
inline long recvmsg(int fd, msghdr* m, int flags) noexcept {
    return GLUON_SYSCALL(::recvmsg(fd, m, flags), SYS_recvmsg, fd, m, flags);
}
inline long sendmsg(int fd, const msghdr* m, int flags) noexcept {
    flags |= MSG_NOSIGNAL;
    return GLUON_SYSCALL(::sendmsg(fd, m, flags), SYS_sendmsg, fd, m, flags);
}
inline long accept(int fd, sockaddr* a, socklen_t* l, int flags) noexcept {
    return GLUON_SYSCALL(::accept4(fd, a, l, flags), SYS_accept4, fd, a, l, flags);
}
inline long connect(int fd, const sockaddr* a, socklen_t l) noexcept {
    return GLUON_SYSCALL(::connect(fd, a, l), SYS_connect, fd, a, l);
}
inline long setsockopt(int fd, int level, int name, const void* v, socklen_t l) noexcept {
    return GLUON_SYSCALL(::setsockopt(fd, level, name, v, l), SYS_setsockopt, fd, level, name, v, l);
}
inline long getsockopt(int fd, int level, int name, void* v, socklen_t* l) noexcept {
    return GLUON_SYSCALL(::getsockopt(fd, level, name, v, l), SYS_getsockopt, fd, level, name, v, l);
}
inline long getsockname(int fd, sockaddr* a, socklen_t* l) noexcept {
    return GLUON_SYSCALL(::getsockname(fd, a, l), SYS_getsockname, fd, a, l);
}
inline long getpeername(int fd, sockaddr* a, socklen_t* l) noexcept {
    return GLUON_SYSCALL(::getpeername(fd, a, l), SYS_getpeername, fd, a, l);
}
/// Returns the pending socket error (SO_ERROR) as -errno, or 0.
inline long socket_error(int fd) noexcept {
    int err = 0;
    socklen_t len = sizeof err;
    if (long r = getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len); r < 0) return r;
    return -err;
}

// ---- files and directories ----------------------------------------------------------------------

inline long close(int fd) noexcept { return GLUON_SYSCALL(::close(fd), SYS_close, fd); }
/// close_range(2): closes (or with CLOSE_RANGE_CLOEXEC marks) the fds first..last.
inline long close_range(unsigned first, unsigned last, int flags) noexcept {
    return GLUON_SYSCALL(::close_range(first, last, flags), SYS_close_range, first, last, flags);
}
inline long fsync(int fd, bool datasync) noexcept {
    if (datasync) return GLUON_SYSCALL(::fdatasync(fd), SYS_fdatasync, fd);
    return GLUON_SYSCALL(::fsync(fd), SYS_fsync, fd);
}
inline long openat(int dir, const char* path, int flags, unsigned mode) noexcept {
    return GLUON_SYSCALL(::openat(dir, path, flags, mode), SYS_openat, dir, path, flags, mode);
}
inline long statx(int dir, const char* path, int flags, unsigned mask, struct statx* out) noexcept {
    return GLUON_SYSCALL(::statx(dir, path, flags, mask, out), SYS_statx, dir, path, flags, mask, out);
}
inline long fstat(int fd, struct stat* out) noexcept { return GLUON_SYSCALL(::fstat(fd, out), SYS_fstat, fd, out); }
/// openat2(2) (no libc wrapper): `how` is a struct open_how from <linux/openat2.h>.
template <typename OpenHow>
inline long openat2(int dir, const char* path, OpenHow* how) noexcept {
    return GLUON_SYSCALL(::syscall(SYS_openat2, dir, path, how, sizeof *how), SYS_openat2, dir, path, how, sizeof *how);
}
/// memfd_create(2): an anonymous file (shared memory passed to another process by fd).
inline long memfd_create(const char* name, unsigned flags) noexcept {
    return GLUON_SYSCALL(::syscall(SYS_memfd_create, name, flags), SYS_memfd_create, name, flags);
}
inline long fstatfs(int fd, struct statfs* out) noexcept {
    return GLUON_SYSCALL(::fstatfs(fd, out), SYS_fstatfs, fd, out);
}
inline long unlinkat(int dir, const char* path, int flags) noexcept {
    return GLUON_SYSCALL(::unlinkat(dir, path, flags), SYS_unlinkat, dir, path, flags);
}
inline long renameat(int od, const char* op, int nd, const char* np, unsigned flags) noexcept {
    return GLUON_SYSCALL(::renameat2(od, op, nd, np, flags), SYS_renameat2, od, op, nd, np, flags);
}
inline long mkdirat(int dir, const char* path, unsigned mode) noexcept {
    return GLUON_SYSCALL(::mkdirat(dir, path, mode), SYS_mkdirat, dir, path, mode);
}
inline long fallocate(int fd, int mode, int64_t off, int64_t len) noexcept {
    return GLUON_SYSCALL(::fallocate(fd, mode, off, len), SYS_fallocate, fd, mode, off, len);
}
inline long ftruncate(int fd, int64_t len) noexcept { return GLUON_SYSCALL(::ftruncate(fd, len), SYS_ftruncate, fd, len); }
inline long linkat(int od, const char* op, int nd, const char* np, int flags) noexcept {
    return GLUON_SYSCALL(::linkat(od, op, nd, np, flags), SYS_linkat, od, op, nd, np, flags);
}
inline long symlinkat(const char* target, int dir, const char* path) noexcept {
    return GLUON_SYSCALL(::symlinkat(target, dir, path), SYS_symlinkat, target, dir, path);
}
inline long readlinkat(int dir, const char* path, char* out, size_t n) noexcept {
    return GLUON_SYSCALL(::readlinkat(dir, path, out, n), SYS_readlinkat, dir, path, out, n);
}
/// access() relative to dir, with the real ids (no AT_* flags: the kernel's faccessat has none).
inline long faccessat(int dir, const char* path, int mode) noexcept {
    return GLUON_SYSCALL(::faccessat(dir, path, mode, 0), SYS_faccessat, dir, path, mode);
}
/// chmod() relative to dir (no AT_* flags: the kernel's fchmodat has none).
inline long fchmodat(int dir, const char* path, mode_t mode) noexcept {
    return GLUON_SYSCALL(::fchmodat(dir, path, mode, 0), SYS_fchmodat, dir, path, mode);
}
inline long utimensat(int dir, const char* path, const timespec times[2], int flags) noexcept {
    return GLUON_SYSCALL(::utimensat(dir, path, times, flags), SYS_utimensat, dir, path, times, flags);
}
/// Reads directory entries (struct dirent64 records) into buf.
inline long getdents64(int fd, void* buf, size_t n) noexcept {
    return GLUON_SYSCALL(::syscall(SYS_getdents64, fd, buf, n), SYS_getdents64, fd, buf, n);
}
/// dup3(2); flags: 0 or O_CLOEXEC. (dup2 is dup3 but for from == to, which dup3 refuses.)
inline long dup3(int from, int to, int flags) noexcept {
    return GLUON_SYSCALL(::dup3(from, to, flags), SYS_dup3, from, to, flags);
}
/// fcntl with an integer (or no) argument: F_GETFL, F_SETFL, F_GETFD, F_DUPFD_CLOEXEC...
inline long fcntl(int fd, int cmd, long arg = 0) noexcept {
    return GLUON_SYSCALL(::fcntl(fd, cmd, arg), SYS_fcntl, fd, cmd, arg);
}
/// Sets O_NONBLOCK on fd: one system call (FIONBIO, which the kernel handles alike for every
/// kind of file), where reading the flags first and then setting them took two for every
/// connection an epoll vCPU registers.
inline long set_nonblocking(int fd) noexcept {
    int on = 1;
    return GLUON_SYSCALL(::ioctl(fd, FIONBIO, &on), SYS_ioctl, fd, FIONBIO, &on);
}
/// ioctl(2) with a pointer (or no) argument.
inline long ioctl(int fd, unsigned long request, void* arg) noexcept {
    return GLUON_SYSCALL(::ioctl(fd, request, arg), SYS_ioctl, fd, request, arg);
}
/// Moves (or with SEEK_CUR and 0, reads) the file position.
inline long lseek(int fd, int64_t off, int whence) noexcept {
    return GLUON_SYSCALL(::lseek(fd, off, whence), SYS_lseek, fd, off, whence);
}
/// poll() of many fds with an optional timeout (nullptr: none); the kernel's ppoll.
inline long ppoll(pollfd* fds, nfds_t n, const timespec* timeout) noexcept {
    return GLUON_SYSCALL(::ppoll(fds, n, timeout, nullptr), SYS_ppoll, fds, n, timeout, nullptr, 0);
}
inline long pipe2(int fds[2], int flags) noexcept { return GLUON_SYSCALL(::pipe2(fds, flags), SYS_pipe2, fds, flags); }
/// Random bytes from the kernel's CSPRNG (may be short for n > 256 only on signals).
inline long getrandom(void* buf, size_t n, unsigned flags) noexcept {
    return GLUON_SYSCALL(::getrandom(buf, n, flags), SYS_getrandom, buf, n, flags);
}

// ---- readiness ----------------------------------------------------------------------------------

/// select() with an optional timeout (nullptr: none) and no signal mask; the kernel's pselect6
/// (which may write the time left into *timeout: pass a copy).
inline long pselect(int nfds, fd_set* rd, fd_set* wr, fd_set* ex, timespec* timeout) noexcept {
    return GLUON_SYSCALL(::pselect(nfds, rd, wr, ex, timeout, nullptr), SYS_pselect6, nfds, rd, wr, ex, timeout,
                         nullptr);
}

/// poll() of one fd: its revents, 0 on timeout (timeout_ms < 0: none), or -errno.
inline long poll1(int fd, short events, int timeout_ms) noexcept {
    pollfd p{fd, events, 0};
    timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1'000'000L};
    timespec* tsp = timeout_ms < 0 ? nullptr : &ts;
    long r = GLUON_SYSCALL(::ppoll(&p, 1, tsp, nullptr), SYS_ppoll, &p, 1, tsp, nullptr, 0);
    return r > 0 ? p.revents : r;
}
inline long eventfd(unsigned initval, int flags) noexcept {
    return GLUON_SYSCALL(::eventfd(initval, flags), SYS_eventfd2, initval, flags);
}
inline long epoll_create(int flags) noexcept {
    return GLUON_SYSCALL(::epoll_create1(flags), SYS_epoll_create1, flags);
}
inline long epoll_ctl(int epfd, int op, int fd, epoll_event* ev) noexcept {
    return GLUON_SYSCALL(::epoll_ctl(epfd, op, fd, ev), SYS_epoll_ctl, epfd, op, fd, ev);
}
/// Waits up to *timeout (nullptr: forever) for events; the kernel's epoll_pwait2.
inline long epoll_wait(int epfd, epoll_event* evs, int n, const timespec* timeout) noexcept {
    return GLUON_SYSCALL(::epoll_pwait2(epfd, evs, n, timeout, nullptr), SYS_epoll_pwait2, epfd, evs, n,
                         timeout, nullptr, 0);
}

}  // namespace gluon::sys
