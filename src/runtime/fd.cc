#include "gluon/runtime/fd.h"

#include <fcntl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>

#include <algorithm>

#include "gluon/common/misuse.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sys/ops.h"
#include "gluon/sys/proc.h"
#include "scheduler.h"

namespace gluon {
using namespace detail;

namespace {

struct op_cancel_ctx {
    engine::engine* eng;
    engine::io_op* op;
};

// Monitoring: operations, their errors and the bytes they moved (runtime/stats.h).
inline long counted(vcpu* v, const engine::io_op& op, long r) noexcept {
    using engine::opcode;
    vcpu_counters& c = v->counters;
    c.ops.add(1);
    if (r < 0) {
        c.op_errors.add(1);
        return r;
    }
    switch (op.code) {
    case opcode::read: case opcode::readv: case opcode::recv: case opcode::recvmsg: case opcode::read_fixed:
    case opcode::recv_pooled:
        c.bytes_in.add(static_cast<uint64_t>(r));
        break;
    case opcode::write: case opcode::writev: case opcode::send: case opcode::sendmsg: case opcode::send_zc:
    case opcode::write_fixed:
        c.bytes_out.add(static_cast<uint64_t>(r));
        break;
    default:
        break;
    }
    return r;
}

// Runs op, waiting until `deadline`, or for `timeout` from when it starts to wait (a timeout
// becomes a deadline only if the op has to wait: an op that completes at submission, as most
// sends and a read that finds data do, reads no clock; one of a second or more reads the
// coarse one, see timeout_deadline).
long run_on_uncounted(vcpu* v, engine::engine* eng, engine::io_op& op, deadline_t deadline,
                      duration timeout) noexcept {
    if (long r = take_interrupt()) return r;
    fiber_impl* f = running(v);
    op.user = f;
    op.on_complete = [](engine::io_op* o, long r) { resume(static_cast<fiber_impl*>(o->user), r); };
    // Timeouts are the vCPU's (its timer heap): an expiry cancels the op (ADR 0015).
    deadline_t park_deadline = deadline;
    long r = eng->submit(op);
    if (r != engine::engine::pending) return r;
    if (timeout != forever) park_deadline = timeout_deadline(timeout);
    op_cancel_ctx ctx{eng, &op};
    return park_current(
        v, park_deadline,
        [](fiber_impl* fb, int err) {
            auto* c = static_cast<op_cancel_ctx*>(fb->cancel_ctx);
            c->eng->cancel(*c->op, err);
            c->eng->flush();
        },
        &ctx);
}

long run_on(vcpu* v, engine::engine* eng, engine::io_op& op, deadline_t deadline,
            duration timeout = forever) noexcept {
    long r = run_on_uncounted(v, eng, op, deadline, timeout);
    return counted(cur_vcpu(), op, r);  // the fiber's vCPU now (the same one: it parked in place)
}

vcpu* vcpu_or_misuse() noexcept {
    vcpu* v = cur_vcpu();
    if (!v) report_misuse("a blocking gluon call on a thread that is not a vCPU (call gluon::init)");
    return v;
}

}  // namespace

long run_op(engine::io_op& op, deadline_t deadline) noexcept {
    vcpu* v = vcpu_or_misuse();
    if (!v) return -EPERM;
    return run_on(v, v->eng.get(), op, deadline);
}

long run_op(engine::engine& eng, engine::io_op& op, deadline_t deadline) noexcept {
    vcpu* v = vcpu_or_misuse();
    if (!v) return -EPERM;
    return run_on(v, &eng, op, deadline);
}

// The socket of a connect that found a Unix listener's backlog full polls writable at once and
// is woken by nothing when the listener accepts (the kernel wakes waiters on the listener), so
// there is nothing to wait on but time. The pauses double: a backlog full for long (a listener
// that stopped accepting) costs a few attempts a second. No attempt is made at the deadline: a
// connect then under way would be cancelled by it, and end as ETIMEDOUT or EAGAIN by chance.
long run_connect(engine::io_op& op, deadline_t deadline) noexcept {
    duration pause = fd::k_connect_pause_first;
    for (;;) {
        const long r = run_op(op, deadline);
        if (r != -EAGAIN) return r;
        const int64_t now = mono_now_ns();
        if (now >= deadline) return r;
        const bool last = deadline - now <= pause.count();
        auto slept = this_fiber::sleep_until(last ? deadline : now + pause.count());
        if (!slept) return -slept.error().value();
        if (last) return r;
        pause = std::min(pause * 2, fd::k_connect_pause_max);
    }
}

namespace fd {
namespace {

deadline_t dl(duration t) { return timeout_deadline(t); }

// One op for t from when it has to wait.
long run_for(engine::io_op& op, duration t) {
    vcpu* v = vcpu_or_misuse();
    if (!v) return -EPERM;
    return run_on(v, v->eng.get(), op, k_no_deadline, t);
}

// One read or write: until the deadline d, or for t from when it has to wait.
long rw_once(engine::opcode code, int fd, void* buf, size_t n, int64_t off, int flags,
             deadline_t d, duration t = forever) {
    vcpu* v = vcpu_or_misuse();
    if (!v) return -EPERM;
    auto op = engine::io_op::transfer(code, fd, buf, n, off, flags);
    return run_on(v, v->eng.get(), op, d, t);
}

result<size_t> rw(engine::opcode code, int fd, void* buf, size_t n, int64_t off, int flags,
                  duration t) {
    return from_syscall<size_t>(rw_once(code, fd, buf, n, off, flags, k_no_deadline, t));
}

bool is_read(engine::opcode c) { return c == engine::opcode::read || c == engine::opcode::recv; }

// Loops a read or write until n bytes moved; one deadline for the whole call. A read that finds
// the end of the stream first fails with ENODATA (net/byte_stream.h: gluon's one end-of-stream
// error); a write that moves nothing fails with EPIPE.
result<void> transfer_all(engine::opcode code, int fd, void* buf, size_t n, duration t) {
    const deadline_t d = dl(t);
    auto* p = static_cast<char*>(buf);
    while (n > 0) {
        long r = rw_once(code, fd, p, n, -1, 0, d);
        if (r < 0) return errno_error(static_cast<int>(-r));
        if (r == 0) return errno_error(is_read(code) ? ENODATA : EPIPE);
        p += r;
        n -= static_cast<size_t>(r);
    }
    return {};
}

}  // namespace

result<size_t> read_some(int fd, void* buf, size_t n, duration t) noexcept {
    return rw(engine::opcode::read, fd, buf, n, -1, 0, t);
}
result<size_t> write_some(int fd, const void* buf, size_t n, duration t) noexcept {
    return rw(engine::opcode::write, fd, const_cast<void*>(buf), n, -1, 0, t);
}
result<size_t> pread(int fd, void* buf, size_t n, int64_t off, duration t) noexcept {
    return rw(engine::opcode::read, fd, buf, n, off, 0, t);
}
result<size_t> pwrite(int fd, const void* buf, size_t n, int64_t off, duration t) noexcept {
    return rw(engine::opcode::write, fd, const_cast<void*>(buf), n, off, 0, t);
}
result<size_t> readv(int fd, const iovec* iov, int cnt, duration t) noexcept {
    return rw(engine::opcode::readv, fd, const_cast<iovec*>(iov), static_cast<size_t>(cnt), -1, 0, t);
}
result<size_t> writev(int fd, const iovec* iov, int cnt, duration t) noexcept {
    return rw(engine::opcode::writev, fd, const_cast<iovec*>(iov), static_cast<size_t>(cnt), -1, 0, t);
}
result<size_t> recv_some(int fd, void* buf, size_t n, int flags, duration t) noexcept {
    return rw(engine::opcode::recv, fd, buf, n, -1, flags, t);
}
result<size_t> recv_ahead(int fd, void* buf, size_t n, duration t) noexcept {
    auto op = engine::io_op::transfer(engine::opcode::recv, fd, buf, n);
    op.shared_recv = true;
    return from_syscall<size_t>(run_for(op, t));
}
result<size_t> send_some(int fd, const void* buf, size_t n, int flags, duration t) noexcept {
    return rw(engine::opcode::send, fd, const_cast<void*>(buf), n, -1, flags, t);
}
result<size_t> recvmsg(int fd, msghdr* msg, int flags, duration t) noexcept {
    return rw(engine::opcode::recvmsg, fd, msg, 0, -1, flags, t);
}
result<size_t> sendmsg(int fd, const msghdr* msg, int flags, duration t) noexcept {
    return rw(engine::opcode::sendmsg, fd, const_cast<msghdr*>(msg), 0, -1, flags, t);
}

result<int> accept(int fd, sockaddr* addr, socklen_t* addrlen, int flags, duration t) noexcept {
    auto op = engine::io_op::accept(fd, addr, addrlen, flags);
    return from_syscall<int>(run_for(op, t));
}

result<void> connect(int fd, const sockaddr* addr, socklen_t len, duration t) noexcept {
    auto op = engine::io_op::connect(fd, addr, len);
    const long r = run_connect(op, dl(t));
    return void_from_syscall(r == -EAGAIN ? -ETIMEDOUT : r);  // the backlog stayed full
}

result<short> poll(int fd, short events, duration t) noexcept {
    if (t == duration::zero()) {  // a look: no op to submit, park on and cancel
        if (vcpu* v = cur_vcpu(); v && (events & POLLIN) && v->eng->holds_input(fd)) return short{POLLIN};
        const long r = sys::poll1(fd, events, 0);
        if (r < 0) return errno_error(static_cast<int>(-r));
        if (r == 0) return errno_error(ETIMEDOUT);
        return static_cast<short>(r);
    }
    auto op = engine::io_op::poll(fd, events);
    return from_syscall<short>(run_for(op, t));
}

result<void> fsync(int fd, bool datasync) noexcept {
    auto op = engine::io_op::fsync(fd, datasync);
    return void_from_syscall(run_op(op));
}

void closing(int fd) noexcept {
    if (vcpu* v = cur_vcpu()) v->eng->forget_fd(fd, true);
    engine::note_fd_closed(fd);
}

result<void> close(int fd) noexcept {
    closing(fd);
    return void_from_syscall(sys::close(fd));
}

namespace {

// Runs a non-blocking attempt until it succeeds, waiting for readiness on EAGAIN. `attempt`
// returns the result or -errno and sets (fd, events) to wait on when it returns -EAGAIN.
template <typename F>
result<size_t> retry_ready(F&& attempt, duration t) {
    const deadline_t d = dl(t);
    for (;;) {
        if (long r = take_interrupt()) return errno_error(static_cast<int>(-r));
        int wfd = -1;
        short ev = 0;
        long r = attempt(wfd, ev);
        if (r >= 0) return static_cast<size_t>(r);
        if (r != -EAGAIN) return errno_error(static_cast<int>(-r));
        auto op = engine::io_op::poll(wfd, ev);
        if (long p = run_op(op, d); p < 0) return errno_error(static_cast<int>(-p));
    }
}

bool is_pipe(int fd) {
    struct stat st;
    return sys::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode);
}

}  // namespace

result<size_t> sendfile(int out_fd, int in_fd, int64_t off, size_t n, duration t) noexcept {
    if (off < 0) return errno_error(EINVAL);
    if (long r = sys::set_nonblocking(out_fd); r < 0) return errno_error(static_cast<int>(-r));
    return retry_ready(
        [&](int& wfd, short& ev) {
            int64_t o = off;
            long r = sys::without_sigpipe([&] { return sys::sendfile(out_fd, in_fd, &o, n); });
            wfd = out_fd;
            ev = POLLOUT;
            return r;
        },
        t);
}

result<size_t> splice(int in_fd, int out_fd, size_t n, duration t) noexcept {
    for (int fd : {in_fd, out_fd}) {
        if (!is_pipe(fd))
            if (long r = sys::set_nonblocking(fd); r < 0) return errno_error(static_cast<int>(-r));
    }
    return retry_ready(
        [&](int& wfd, short& ev) {
            long r = sys::without_sigpipe([&] { return sys::splice(in_fd, out_fd, n, SPLICE_F_NONBLOCK | SPLICE_F_MOVE); });
            if (r == -EAGAIN) {
                // Which side is not ready: wait for input unless input is already there.
                const bool readable = sys::poll1(in_fd, POLLIN, 0) > 0;
                wfd = readable ? out_fd : in_fd;
                ev = readable ? POLLOUT : POLLIN;
            }
            return r;
        },
        t);
}

result<void> write_all(int fd, const void* buf, size_t n, duration t) noexcept {
    return transfer_all(engine::opcode::write, fd, const_cast<void*>(buf), n, t);
}

result<void> read_exactly(int fd, void* buf, size_t n, duration t) noexcept {
    return transfer_all(engine::opcode::read, fd, buf, n, t);
}

result<void> send_all(int fd, const void* buf, size_t n, duration t) noexcept {
    return transfer_all(engine::opcode::send, fd, const_cast<void*>(buf), n, t);
}

result<void> recv_exactly(int fd, void* buf, size_t n, duration t) noexcept {
    return transfer_all(engine::opcode::recv, fd, buf, n, t);
}

result<void> send_all_zerocopy(int fd, const void* buf, size_t n, duration t) noexcept {
    return transfer_all(engine::opcode::send_zc, fd, const_cast<void*>(buf), n, t);
}

}  // namespace fd
}  // namespace gluon
