#include "gluon/file_io/file_engine.h"

#include "engines.h"
#include "gluon/runtime/fd.h"

namespace gluon::file_io {

const char* kind_name(engine_kind k) noexcept {
    switch (k) {
        case engine_kind::automatic: return "auto";
        case engine_kind::io_uring: return "io_uring";
        case engine_kind::libaio: return "libaio";
        case engine_kind::posix_aio: return "posix_aio";
        case engine_kind::psync: return "psync";
        case engine_kind::psync_inline: return "psync_inline";
    }
    return "?";
}

std::optional<engine_kind> parse_kind(std::string_view s) noexcept {
    struct alias {
        std::string_view name;
        engine_kind kind;
    };
    static constexpr alias names[] = {
        {"auto", engine_kind::automatic},   {"automatic", engine_kind::automatic},
        {"io_uring", engine_kind::io_uring}, {"libaio", engine_kind::libaio},
        {"aio", engine_kind::libaio},        {"posix_aio", engine_kind::posix_aio},
        {"psync", engine_kind::psync},       {"psync_inline", engine_kind::psync_inline},
        {"sync", engine_kind::psync_inline},
    };
    for (const auto& a : names) {
        if (a.name == s) return a.kind;
    }
    return std::nullopt;
}

bool available(engine_kind k) noexcept {
    switch (k) {
        case engine_kind::io_uring: return engine::available(engine::kind::io_uring);
        case engine_kind::libaio: return detail::libaio_available();
#if defined(__SANITIZE_THREAD__)
        // glibc starts its AIO threads inside libc, where ThreadSanitizer cannot see them; the
        // completion callback then crashes in TSan's allocator.
        case engine_kind::posix_aio: return false;
#endif
        default: return true;
    }
}

result<file_engine*> get(engine_kind k) noexcept {
    if (k == engine_kind::automatic)
        k = available(engine_kind::io_uring) ? engine_kind::io_uring : engine_kind::psync;
    if (!available(k)) return errno_error(EOPNOTSUPP);
    switch (k) {
        case engine_kind::io_uring: return &detail::uring_engine();
        case engine_kind::libaio: return &detail::libaio_engine();
        case engine_kind::posix_aio: return &detail::posix_aio_engine();
        case engine_kind::psync: return &detail::psync_engine();
        case engine_kind::psync_inline: return &detail::psync_inline_engine();
        case engine_kind::automatic: break;
    }
    return errno_error(EINVAL);
}

// ---- typed operations ------------------------------------------------------------------------

namespace {
// -1 is the fd's current position (io_op's spelling, and preadv2's). Below it the engines
// differed: io_uring refused it, the others ran it as a read or write at the current position.
bool bad_offset(int64_t off) noexcept { return off < -1; }
}  // namespace

result<size_t> pread(file_engine& e, int fd, void* buf, size_t n, int64_t off, duration t) noexcept {
    if (bad_offset(off)) return errno_error(EINVAL);
    auto op = engine::io_op::transfer(engine::opcode::read, fd, buf, n, off);
    return from_syscall<size_t>(e.execute(op, deadline_after(t)));
}

result<size_t> pwrite(file_engine& e, int fd, const void* buf, size_t n, int64_t off,
                      duration t) noexcept {
    if (bad_offset(off)) return errno_error(EINVAL);
    auto op = engine::io_op::transfer(engine::opcode::write, fd, const_cast<void*>(buf), n, off);
    return from_syscall<size_t>(e.execute(op, deadline_after(t)));
}

result<size_t> preadv(file_engine& e, int fd, const iovec* iov, int cnt, int64_t off,
                      duration t) noexcept {
    if (bad_offset(off)) return errno_error(EINVAL);
    auto op = engine::io_op::vectored(engine::opcode::readv, fd, iov, cnt, off);
    return from_syscall<size_t>(e.execute(op, deadline_after(t)));
}

result<size_t> pwritev(file_engine& e, int fd, const iovec* iov, int cnt, int64_t off,
                       duration t) noexcept {
    if (bad_offset(off)) return errno_error(EINVAL);
    auto op = engine::io_op::vectored(engine::opcode::writev, fd, iov, cnt, off);
    return from_syscall<size_t>(e.execute(op, deadline_after(t)));
}

result<void> fsync(file_engine& e, int fd, bool datasync) noexcept {
    auto op = engine::io_op::fsync(fd, datasync);
    return void_from_syscall(e.execute(op));
}

result<void> fallocate(file_engine& e, int fd, int mode, int64_t off, int64_t len) noexcept {
    if (off < 0 || len <= 0) return errno_error(EINVAL);
    auto op = engine::io_op::fallocate(fd, mode, off, len);
    return void_from_syscall(e.execute(op));
}

result<void> ftruncate(file_engine& e, int fd, int64_t len) noexcept {
    if (len < 0) return errno_error(EINVAL);
    auto op = engine::io_op::ftruncate(fd, len);
    return void_from_syscall(e.execute(op));
}

result<int> openat(file_engine& e, int dir, const char* path, int flags, mode_t mode) noexcept {
    auto op = engine::io_op::openat(dir, path, flags, mode);
    return from_syscall<int>(e.execute(op));
}

result<void> close(file_engine& e, int fd) noexcept {
    fd::closing(fd);
    auto op = engine::io_op::close(fd);
    return void_from_syscall(e.execute(op));
}

result<struct statx> statx(file_engine& e, int dir, const char* path, int flags, unsigned mask) noexcept {
    struct statx st {};
    auto op = engine::io_op::statx(dir, path, flags, mask, &st);
    long r = e.execute(op);
    if (r < 0) return errno_error(static_cast<int>(-r));
    return st;
}

result<void> unlinkat(file_engine& e, int dir, const char* path, int flags) noexcept {
    auto op = engine::io_op::unlinkat(dir, path, flags);
    return void_from_syscall(e.execute(op));
}

result<void> renameat(file_engine& e, int od, const char* op_path, int nd, const char* np,
                      unsigned flags) noexcept {
    auto op = engine::io_op::renameat(od, op_path, nd, np, flags);
    return void_from_syscall(e.execute(op));
}

result<void> mkdirat(file_engine& e, int dir, const char* path, mode_t mode) noexcept {
    auto op = engine::io_op::mkdirat(dir, path, mode);
    return void_from_syscall(e.execute(op));
}

}  // namespace gluon::file_io
