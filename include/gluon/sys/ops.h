// The syscall floor: thin wrappers that return the result or -errno. errno is read here and
// nowhere else in gluon (and never across a fiber switch).
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace gluon::sys {

inline long ret(long r) noexcept { return r < 0 ? -errno : r; }

inline long read(int fd, void* b, size_t n, int64_t off) noexcept {
    return ret(off < 0 ? ::read(fd, b, n) : ::pread(fd, b, n, off));
}
inline long write(int fd, const void* b, size_t n, int64_t off) noexcept {
    return ret(off < 0 ? ::write(fd, b, n) : ::pwrite(fd, b, n, off));
}
inline long readv(int fd, const iovec* v, int cnt, int64_t off) noexcept {
    return ret(off < 0 ? ::readv(fd, v, cnt) : ::preadv(fd, v, cnt, off));
}
inline long writev(int fd, const iovec* v, int cnt, int64_t off) noexcept {
    return ret(off < 0 ? ::writev(fd, v, cnt) : ::pwritev(fd, v, cnt, off));
}
inline long recv(int fd, void* b, size_t n, int flags) noexcept { return ret(::recv(fd, b, n, flags)); }
inline long send(int fd, const void* b, size_t n, int flags) noexcept {
    return ret(::send(fd, b, n, flags | MSG_NOSIGNAL));
}
inline long recvmsg(int fd, msghdr* m, int flags) noexcept { return ret(::recvmsg(fd, m, flags)); }
inline long sendmsg(int fd, const msghdr* m, int flags) noexcept {
    return ret(::sendmsg(fd, m, flags | MSG_NOSIGNAL));
}
inline long accept(int fd, sockaddr* a, socklen_t* l, int flags) noexcept {
    return ret(::accept4(fd, a, l, flags));
}
inline long connect(int fd, const sockaddr* a, socklen_t l) noexcept { return ret(::connect(fd, a, l)); }
inline long close(int fd) noexcept { return ret(::close(fd)); }
inline long fsync(int fd, bool datasync) noexcept { return ret(datasync ? ::fdatasync(fd) : ::fsync(fd)); }
inline long openat(int dir, const char* path, int flags, unsigned mode) noexcept {
    return ret(::openat(dir, path, flags, mode));
}
inline long statx(int dir, const char* path, int flags, unsigned mask, struct statx* out) noexcept {
    return ret(::statx(dir, path, flags, mask, out));
}
inline long unlinkat(int dir, const char* path, int flags) noexcept {
    return ret(::unlinkat(dir, path, flags));
}
inline long renameat(int od, const char* op, int nd, const char* np, unsigned flags) noexcept {
    return ret(::renameat2(od, op, nd, np, flags));
}
inline long mkdirat(int dir, const char* path, unsigned mode) noexcept {
    return ret(::mkdirat(dir, path, mode));
}
inline long fallocate(int fd, int mode, int64_t off, int64_t len) noexcept {
    return ret(::fallocate(fd, mode, off, len));
}
inline long ftruncate(int fd, int64_t len) noexcept { return ret(::ftruncate(fd, len)); }
inline long fstat(int fd, struct stat* out) noexcept { return ret(::fstat(fd, out)); }
/// openat2(2) (no libc wrapper): `how` is a struct open_how from <linux/openat2.h>.
template <typename OpenHow>
inline long openat2(int dir, const char* path, OpenHow* how) noexcept {
    return ret(::syscall(SYS_openat2, dir, path, how, sizeof *how));
}
/// shutdown(2): SHUT_RD, SHUT_WR or SHUT_RDWR.
inline long shutdown(int fd, int how) noexcept { return ret(::shutdown(fd, how)); }
inline long poll1(int fd, short events, int timeout_ms) noexcept {
    pollfd p{fd, events, 0};
    long r = ret(::poll(&p, 1, timeout_ms));
    return r > 0 ? p.revents : r;
}
/// Returns the pending socket error (SO_ERROR) as -errno, or 0.
inline long socket_error(int fd) noexcept {
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0) return -errno;
    return -err;
}
/// Sets O_NONBLOCK on fd (no-op if already set).
inline long set_nonblocking(int fd) noexcept {
    int fl = ::fcntl(fd, F_GETFL);
    if (fl < 0) return -errno;
    if (fl & O_NONBLOCK) return 0;
    return ret(::fcntl(fd, F_SETFL, fl | O_NONBLOCK));
}

}  // namespace gluon::sys
