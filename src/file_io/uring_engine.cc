// io_uring file engine. Buffered positioned reads and writes first try the page cache inline
// (preadv2/pwritev2 with RWF_NOWAIT): a hit costs one syscall and no ring round trip, a miss
// (EAGAIN) goes to the ring. Files on memory filesystems (tmpfs, ramfs), which refuse
// RWF_NOWAIT but never wait for a device, are read and written inline; io_uring would hand each
// of their operations to a kernel worker thread. What an fd is gets learned on its first such
// operation and relearned once the number has been closed through gluon (fd::close, file_io::close);
// an fd closed behind gluon's back keeps its class: only speed, never correctness, depends on it.
//
// On a vCPU whose event engine is io_uring, file ops go on the same ring
// as everything else (batched with the network, one io_uring_enter per scheduler pass). On an
// epoll vCPU they go on a second, per-thread ring without DEFER_TASKRUN (so the kernel posts
// completions by itself), whose fd the epoll loop watches through a driver fiber that runs only
// while operations are in flight.
#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <iterator>
#include <memory>
#include <new>

#include "gluon/common/fd_table.h"
#include "gluon/common/lazy.h"
#include "gluon/common/log.h"
#include "gluon/runtime/fd.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu.h"
#include "gluon/runtime/waiter.h"
#include "gluon/sys/ops.h"
#include "gluon/sys/proc.h"
#include "engines.h"

namespace gluon::file_io::detail {
namespace {

struct side_ring {
    std::unique_ptr<engine::engine> eng;
    unsigned inflight = 0;
    bool driving = false;
    bool flush_scheduled = false;
    bool failed = false;  // could not create the ring: run ops blocking
};

thread_local side_ring t_side;

// Dispatches the side ring's completions while any operation is in flight. Interrupts (from
// gluon::fini) do not stop it early: a fiber waiting on the ring would never wake.
void drive(side_ring* s) {
    const int rfd = s->eng->pollable_fd();
    while (s->inflight > 0) {
        (void)fd::poll(rfd, POLLIN);
        s->eng->wait(0);
    }
    s->driving = false;
}

long run_on_side(engine::io_op& op, deadline_t d) noexcept {
    side_ring& s = t_side;
    if (!s.eng && !s.failed) {
        engine::options o;
        o.queue_depth = 256;
        o.pollable = true;
        auto e = engine::create(engine::kind::io_uring, o);
        if (e) {
            s.eng = std::move(*e);
        } else {
            s.failed = true;
            GLUON_LOG(warn, "io_uring file engine: no side ring on this epoll vCPU ({}); "
                           "file ops run as blocking syscalls", e.error().message());
        }
    }
    if (s.failed) return engine::execute_blocking(op);
    if (!s.driving) {
        auto f = spawn(fiber_options{.name = "io_uring-files"}, drive, &s);
        if (!f) return engine::execute_blocking(op);
        s.driving = true;
        (void)f->detach();
    }
    // One io_uring_enter for all the operations the ready fibers queue in this pass: a fiber
    // queued behind them submits the batch. (A submit per operation costs a device kick each,
    // a VM exit on virtual disks: measured 2x slower at depth 32.)
    if (!s.flush_scheduled) {
        auto f = spawn(fiber_options{.name = "io_uring-flush"}, [](side_ring* sr) {
            sr->flush_scheduled = false;
            sr->eng->flush();
        }, &s);
        if (!f) return engine::execute_blocking(op);
        s.flush_scheduled = true;
        (void)f->detach();
    }
    ++s.inflight;
    long r = run_op(*s.eng, op, d);
    --s.inflight;
    return r;
}

long run_async(engine::engine* eng, engine::io_op& op, deadline_t d) noexcept {
    if (eng->type() == engine::kind::io_uring) return run_op(op, d);
    // Registrations belong to the vCPU's own ring; the side ring has none.
    if (op.fixed_file) return -EOPNOTSUPP;
    if (op.code == engine::opcode::read_fixed) op.code = engine::opcode::read;
    if (op.code == engine::opcode::write_fixed) op.code = engine::opcode::write;
    return run_on_side(op, d);
}

// ---- the inline fast path ----------------------------------------------------------------------

enum fd_class : uint8_t { k_unknown, k_async_only, k_nowait_first, k_inline };
// Per fd number: (close generation << 8) | fd_class. A class learned before the number was
// last closed (engine::fd_generation moved on) is stale and learned again.
constinit lazy_ptr<fd_table<std::atomic<uint32_t>>> g_classes;  // never freed: used until exit
fd_table<std::atomic<uint32_t>>& classes() noexcept {
    return g_classes.get([] { return new fd_table<std::atomic<uint32_t>>(sys::fd_limit()); });
}

uint32_t tagged(int fd, uint8_t c) noexcept { return (engine::fd_generation(fd) << 8) | c; }

uint8_t classify(int fd) noexcept {
    long fl = sys::fcntl(fd, F_GETFL);
    struct stat st;
    if (fl < 0 || sys::fstat(fd, &st) < 0) return k_async_only;
    if ((fl & O_DIRECT) || !S_ISREG(st.st_mode)) return k_async_only;
    struct statfs sf;
    if (sys::fstatfs(fd, &sf) == 0 && (sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC))
        return k_inline;
    return k_nowait_first;
}

// Positioned I/O that preadv2/pwritev2 can do: not into registered buffers or files.
bool is_positioned_rw(const engine::io_op& op) noexcept {
    return engine::is_positioned_io(op) && op.code != engine::opcode::read_fixed &&
           op.code != engine::opcode::write_fixed && !op.fixed_file && op.fd >= 0;
}

long nowait_attempt(const engine::io_op& op) noexcept {
    iovec one{op.buf, op.len};
    const bool vec = op.code == engine::opcode::readv || op.code == engine::opcode::writev;
    const iovec* iov = vec ? static_cast<const iovec*>(op.buf) : &one;
    const int cnt = vec ? static_cast<int>(op.len) : 1;
    const bool rd = op.code == engine::opcode::read || op.code == engine::opcode::readv;
    return rd ? sys::preadv2(op.fd, iov, cnt, op.offset, RWF_NOWAIT)
              : sys::pwritev2(op.fd, iov, cnt, op.offset, RWF_NOWAIT);
}

// What the ring moved of the rest of a partly cached transfer. The cached part has moved and
// is what the call reports, so the rest failing only makes the transfer short (as the kernel's
// would be); but if it ended on an interrupt (ECANCELED), that interrupt was consumed for a
// call that returns its real result: it goes back, pending for the next blocking call (fiber.h).
long rest_moved(long r) noexcept {
    if (r == -ECANCELED) restore_interrupt();
    return r < 0 ? 0 : r;
}

// The part of a vectored op past its first `done` bytes, run on the ring: how many bytes it
// moved (rest_moved), 0 if none were left or there was no memory to describe it (the transfer
// is then short, as the kernel's would be).
long rest_vectored(engine::engine* eng, const engine::io_op& op, size_t done, deadline_t d) noexcept {
    const auto* iov = static_cast<const iovec*>(op.buf);
    size_t cnt = op.len;
    const int64_t off = op.offset + static_cast<int64_t>(done);
    while (cnt > 0 && done >= iov->iov_len) {
        done -= iov->iov_len;
        ++iov;
        --cnt;
    }
    if (cnt == 0) return 0;
    iovec small[8];
    std::unique_ptr<iovec[]> big;
    iovec* left = small;
    if (cnt > std::size(small)) {
        big.reset(new (std::nothrow) iovec[cnt]);
        if (!big) return 0;
        left = big.get();
    }
    std::copy(iov, iov + cnt, left);
    left[0].iov_base = static_cast<char*>(left[0].iov_base) + done;
    left[0].iov_len -= done;
    engine::io_op rest = engine::io_op::vectored(op.code, op.fd, left, static_cast<int>(cnt), off);
    return rest_moved(run_async(eng, rest, d));
}

long execute_fast(engine::engine* eng, engine::io_op& op, deadline_t d) noexcept {
    std::atomic<uint32_t>* slot = classes().get(op.fd);
    if (!slot) return run_async(eng, op, d);  // beyond the fd limit, or out of memory
    std::atomic<uint32_t>& cls = *slot;
    const uint32_t v = cls.load(std::memory_order_relaxed);
    auto c = static_cast<uint8_t>(v & 0xff);
    if (c == k_unknown || (v >> 8) != (engine::fd_generation(op.fd) & 0xffffff)) {
        c = classify(op.fd);
        cls.store(tagged(op.fd, c), std::memory_order_relaxed);
    }
    if (c == k_inline) return engine::execute_blocking(op);
    if (c == k_async_only) return run_async(eng, op, d);
    long r = nowait_attempt(op);
    if (r == -EAGAIN) return run_async(eng, op, d);
    if (r == -EOPNOTSUPP) {
        cls.store(tagged(op.fd, k_async_only), std::memory_order_relaxed);
        return run_async(eng, op, d);
    }
    if (r <= 0) return r;
    // Part of the range was cached: the rest from the ring, so a read is short only at EOF.
    if (op.code == engine::opcode::readv || op.code == engine::opcode::writev)
        return r + rest_vectored(eng, op, static_cast<size_t>(r), d);
    if (static_cast<size_t>(r) == op.len) return r;
    engine::io_op rest;
    rest.code = op.code;
    rest.fd = op.fd;
    rest.buf = static_cast<char*>(op.buf) + r;
    rest.len = op.len - static_cast<size_t>(r);
    rest.offset = op.offset + r;
    return r + rest_moved(run_async(eng, rest, d));
}

// The most bytes one read(2) or write(2) moves (the kernel's MAX_RW_COUNT: INT_MAX rounded
// down to a page). A plain read or write carries its length in the SQE's 32 bits, so a longer
// one would lose its high bits (2^32 bytes became 0, a false end of file); it is cut here
// instead and comes back short, as the syscall's would (the vectored forms count iovecs).
constexpr size_t k_max_rw = 0x7ffff000;

bool is_plain_rw(const engine::io_op& op) noexcept {
    return op.code == engine::opcode::read || op.code == engine::opcode::write ||
           op.code == engine::opcode::read_fixed || op.code == engine::opcode::write_fixed;
}

class uring final : public file_engine {
public:
    engine_kind kind() const noexcept override { return engine_kind::io_uring; }
    long execute(engine::io_op& op, deadline_t d) noexcept override {
        engine::engine* eng = current_engine();
        if (!eng) return engine::execute_blocking(op);
        if (is_plain_rw(op) && op.len > k_max_rw) op.len = k_max_rw;
        if (is_positioned_rw(op)) return execute_fast(eng, op, d);
        return run_async(eng, op, d);
    }
};

}  // namespace

static constinit immortal<uring> g_uring_engine;  // no local static (lazy.h)

file_engine& uring_engine() noexcept { return g_uring_engine.value; }

}  // namespace gluon::file_io::detail
