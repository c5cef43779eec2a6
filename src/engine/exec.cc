#include "exec.h"

#include <poll.h>

#include "gluon/sys/ops.h"

namespace gluon::engine::detail {

long exec_now(io_op& op) noexcept {
    switch (op.code) {
        case opcode::nop: return 0;
        case opcode::read: return sys::read(op.fd, op.buf, op.len, op.offset);
        case opcode::write: return sys::write(op.fd, op.buf, op.len, op.offset);
        case opcode::readv:
            return sys::readv(op.fd, static_cast<iovec*>(op.buf), static_cast<int>(op.len), op.offset);
        case opcode::writev:
            return sys::writev(op.fd, static_cast<iovec*>(op.buf), static_cast<int>(op.len), op.offset);
        case opcode::recv: return sys::recv(op.fd, op.buf, op.len, op.flags | MSG_DONTWAIT);
        case opcode::recv_pooled: return -EOPNOTSUPP;  // the engine picks the buffer: never blocking
        case opcode::send:
        case opcode::send_zc: return sys::send(op.fd, op.buf, op.len, op.flags | MSG_DONTWAIT);
        case opcode::recvmsg: return sys::recvmsg(op.fd, static_cast<msghdr*>(op.buf), op.flags | MSG_DONTWAIT);
        case opcode::sendmsg: return sys::sendmsg(op.fd, static_cast<msghdr*>(op.buf), op.flags | MSG_DONTWAIT);
        case opcode::accept:
            return sys::accept(op.fd, static_cast<sockaddr*>(op.buf), op.addrlen, op.flags);
        case opcode::connect: {
            // A connect that is under way reports completion as writability plus SO_ERROR.
            if (op.engine_busy) {
                long r = sys::poll1(op.fd, POLLOUT, 0);
                if (r == 0) return -EAGAIN;
                if (r < 0) return r;
                return sys::socket_error(op.fd);
            }
            long r = sys::connect(op.fd, static_cast<sockaddr*>(op.buf), static_cast<socklen_t>(op.len));
            if (r == -EINPROGRESS) {
                op.engine_busy = true;
                return -EAGAIN;
            }
            return r;
        }
        case opcode::poll: {
            long r = sys::poll1(op.fd, static_cast<short>(op.poll_events), 0);
            return r == 0 ? -EAGAIN : r;
        }
        case opcode::fsync: return sys::fsync(op.fd, op.flags & 1);
        case opcode::openat:
            return sys::openat(op.fd, static_cast<const char*>(op.buf), op.flags, static_cast<unsigned>(op.len));
        case opcode::close: return sys::close(op.fd);
        case opcode::statx:
            return sys::statx(op.fd, static_cast<const char*>(op.buf), op.flags,
                              static_cast<unsigned>(op.len), static_cast<struct statx*>(op.buf2));
        case opcode::unlinkat: return sys::unlinkat(op.fd, static_cast<const char*>(op.buf), op.flags);
        case opcode::renameat:
            return sys::renameat(op.fd, static_cast<const char*>(op.buf), op.fd2,
                                 static_cast<const char*>(op.buf2), static_cast<unsigned>(op.flags));
        case opcode::mkdirat:
            return sys::mkdirat(op.fd, static_cast<const char*>(op.buf), static_cast<unsigned>(op.len));
        case opcode::fallocate:
            return sys::fallocate(op.fd, op.flags, op.offset, static_cast<int64_t>(op.len));
        case opcode::ftruncate: return sys::ftruncate(op.fd, op.offset);
        // Registered buffers are plain memory: outside io_uring they are ordinary reads/writes.
        case opcode::read_fixed: return sys::read(op.fd, op.buf, op.len, op.offset);
        case opcode::write_fixed: return sys::write(op.fd, op.buf, op.len, op.offset);
    }
    return -EINVAL;
}

}  // namespace gluon::engine::detail

namespace gluon::engine {

long execute_blocking(io_op& op) noexcept {
    if (op.fixed_file) return -EOPNOTSUPP;
    return detail::exec_now(op);
}

result<void> engine::register_buffers(const iovec*, unsigned) noexcept { return errno_error(EOPNOTSUPP); }
result<void> engine::register_files(const int*, unsigned) noexcept { return errno_error(EOPNOTSUPP); }

}  // namespace gluon::engine

namespace gluon::engine::detail {

bool waits_for_input(const io_op& op) noexcept {
    switch (op.code) {
        case opcode::read:
        case opcode::readv:
        case opcode::recv:
        case opcode::recv_pooled:
        case opcode::recvmsg:
        case opcode::accept: return true;
        case opcode::poll: return (op.poll_events & (POLLIN | POLLPRI | POLLRDHUP)) != 0;
        default: return false;
    }
}

}  // namespace gluon::engine::detail
