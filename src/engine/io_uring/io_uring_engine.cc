#include "io_uring_engine.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <time.h>

#include <algorithm>

#include "gluon/sys/mm.h"
#include "gluon/sys/ops.h"

namespace gluon::engine {
namespace {

// Newer than liburing 2.3's headers (kernel 6.9).
constexpr int k_op_ftruncate = 55;

// The kernel opcode behind each of ours, for the probe.
int kernel_opcode(opcode c) {
    switch (c) {
        case opcode::nop: return IORING_OP_NOP;
        case opcode::read: return IORING_OP_READ;
        case opcode::write: return IORING_OP_WRITE;
        case opcode::readv: return IORING_OP_READV;
        case opcode::writev: return IORING_OP_WRITEV;
        case opcode::recv:
        case opcode::recv_pooled: return IORING_OP_RECV;
        case opcode::send: return IORING_OP_SEND;
        case opcode::recvmsg: return IORING_OP_RECVMSG;
        case opcode::sendmsg: return IORING_OP_SENDMSG;
        case opcode::accept: return IORING_OP_ACCEPT;
        case opcode::connect: return IORING_OP_CONNECT;
        case opcode::poll: return IORING_OP_POLL_ADD;
        case opcode::fsync: return IORING_OP_FSYNC;
        case opcode::send_zc: return IORING_OP_SEND_ZC;
        case opcode::openat: return IORING_OP_OPENAT;
        case opcode::close: return IORING_OP_CLOSE;
        case opcode::statx: return IORING_OP_STATX;
        case opcode::unlinkat: return IORING_OP_UNLINKAT;
        case opcode::renameat: return IORING_OP_RENAMEAT;
        case opcode::mkdirat: return IORING_OP_MKDIRAT;
        case opcode::fallocate: return IORING_OP_FALLOCATE;
        case opcode::ftruncate: return k_op_ftruncate;
        case opcode::read_fixed: return IORING_OP_READ_FIXED;
        case opcode::write_fixed: return IORING_OP_WRITE_FIXED;
    }
    return -1;
}

// Opcodes that submit() queues as they are, with none of its special cases: native ones other
// than file I/O (batched), pooled receives, accepts and polls.
bool plain_opcode(opcode c) {
    switch (c) {
        case opcode::nop:
        case opcode::recv:
        case opcode::send:
        case opcode::recvmsg:
        case opcode::sendmsg:
        case opcode::send_zc:
        case opcode::connect: return true;
        default: return false;
    }
}

bool is_socket_like(opcode c) {
    switch (c) {
        case opcode::read:
        case opcode::write:
        case opcode::readv:
        case opcode::writev:
        case opcode::recv:
        case opcode::recv_pooled:
        case opcode::send:
        case opcode::send_zc:
        case opcode::recvmsg:
        case opcode::sendmsg:
        case opcode::accept:
        case opcode::connect: return true;
        default: return false;
    }
}

// At most this many positioned file I/Os wait in the SQ for the end of the scheduler pass. A
// device served by a batch of completions (virtio-blk here completes ~15 at a time) otherwise
// gets nothing new until every resumed fiber has run: 4 KiB random O_DIRECT reads at depth
// 16 ran at 0.88x fio's IOPS submitting once per pass, 1.00x with 2 or 4, 0.97x with 8 (10
// alternating runs each). Sockets keep the one submission per pass: their work is done
// inside io_uring_enter, so submitting earlier only adds system calls.
constexpr unsigned k_file_io_batch = 4;

// The most bytes one read(2), write(2), recv(2) or send(2) moves (the kernel's MAX_RW_COUNT:
// INT_MAX rounded down to a page). The SQE carries a transfer's length in 32 bits, so a longer
// one would lose its high bits (2^32 bytes went in as 0: a send moved nothing, a read said end of
// file; 2^32 + 16 as 16); cut to this, it comes back short, as the syscall's and epoll's do. The
// vectored and msghdr forms count iovecs, whose total the kernel cuts itself.
constexpr size_t k_max_rw = 0x7ffff000;

unsigned rw_len(size_t n) { return static_cast<unsigned>(std::min(n, k_max_rw)); }

// -ECANCELED from the kernel after cancel(): say why it was cancelled.
// ECANCELED is the reason we cancelled for (ETIMEDOUT, ...), or, when we gave none, the fd was
// closed under the operation (cancel_in_kernel): EBADF, as on epoll.
// Whether result r is that of the op's cancel: ECANCELED, or EINTR from an op the kernel was
// running in a worker thread (a blocking connect, e.g. to a Unix listener's full backlog),
// which the cancel interrupts.
bool cancel_ended(const io_op& op, long r) { return r == -ECANCELED || (r == -EINTR && op.cancel_errno); }

long cancelled_result(const io_op& op, long r) {
    if (!cancel_ended(op, r)) return r;
    return op.cancel_errno ? -op.cancel_errno : -EBADF;
}

short wanted_events(const io_op& op) {
    switch (op.code) {
        case opcode::read:
        case opcode::readv:
        case opcode::recv:
        case opcode::recv_pooled:
        case opcode::recvmsg:
        case opcode::accept: return POLLIN;
        default: return POLLOUT;
    }
}

// The ring this thread created with DEFER_TASKRUN, if any: the one it may submit a wake-up of
// another vCPU's ring on.
thread_local io_uring_engine* t_own_ring = nullptr;

}  // namespace

result<std::unique_ptr<engine>> io_uring_engine::create(const options& opts) {
    std::unique_ptr<io_uring_engine> e(new io_uring_engine);
    io_uring_params p{};
    // Most capable first; each fallback drops what an older kernel rejects with EINVAL.
    const unsigned base = opts.sqpoll ? IORING_SETUP_SQPOLL : 0;
    const unsigned attempts[] = {
        base | IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN |
            IORING_SETUP_TASKRUN_FLAG,
        base | IORING_SETUP_SUBMIT_ALL | IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
        base | IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
        base,
    };
    int r = -EINVAL;
    for (unsigned flags : attempts) {
        // SQPOLL is incompatible with DEFER_TASKRUN. A polled ring needs its completions posted
        // while its thread sleeps elsewhere (in epoll_wait): neither DEFER_TASKRUN (posted only
        // by a wait on this ring) nor COOP_TASKRUN (posted only when the thread next enters the
        // kernel, and nothing wakes it for that).
        if ((opts.sqpoll || opts.pollable) && (flags & IORING_SETUP_DEFER_TASKRUN)) continue;
        if (opts.pollable && (flags & IORING_SETUP_COOP_TASKRUN)) continue;
        p = {};
        p.flags = flags | IORING_SETUP_CLAMP;
        p.cq_entries = opts.queue_depth * 4;
        p.flags |= IORING_SETUP_CQSIZE;
        r = io_uring_queue_init_params(opts.queue_depth, &e->ring_, &p);
        if (r != -EINVAL) break;
    }
    if (r < 0) return errno_error(-r);
    e->taskrun_flag_ = (e->ring_.flags & IORING_SETUP_TASKRUN_FLAG) != 0;
    e->deferred_ = (e->ring_.flags & IORING_SETUP_DEFER_TASKRUN) != 0;
    // Saves the fd lookup on every io_uring_enter; optional.
    (void)io_uring_register_ring_fd(&e->ring_);
    // Without the probe (refused by seccomp, or out of memory) every opcode counted as missing
    // and ran as a blocking syscall: a socket's, tried once with MSG_DONTWAIT, failed with EAGAIN
    // instead of waiting. Such a ring, or one without the operations that have no blocking
    // stand-in (the wake-up's read, readiness polls, cancels) or whose stand-in cannot wait
    // (the socket ones), is refused: epoll serves instead.
    io_uring_probe* probe = io_uring_get_probe_ring(&e->ring_);
    if (!probe) return errno_error(EOPNOTSUPP);
    const bool msg_ring = io_uring_opcode_supported(probe, IORING_OP_MSG_RING);
    bool usable = io_uring_opcode_supported(probe, IORING_OP_ASYNC_CANCEL);
    for (unsigned c = 0; c < k_opcode_count; ++c) {
        int k = kernel_opcode(static_cast<opcode>(c));
        e->native_[c] = k >= 0 && io_uring_opcode_supported(probe, k);
        e->plain_[c] = e->native_[c] && plain_opcode(static_cast<opcode>(c));
    }
    io_uring_free_probe(probe);
    for (opcode c : {opcode::read, opcode::poll, opcode::recv, opcode::send, opcode::accept,
                     opcode::connect})
        usable = usable && e->native_[static_cast<unsigned>(c)];
    if (!usable) return errno_error(EOPNOTSUPP);
    long evfd = sys::eventfd(0, EFD_CLOEXEC);
    if (evfd < 0) return errno_error(static_cast<int>(-evfd));
    e->evfd_ = static_cast<int>(evfd);
    e->arm_notify();
    if (e->deferred_ && msg_ring) t_own_ring = e.get();
    return std::unique_ptr<engine>(std::move(e));
}

io_uring_engine::~io_uring_engine() {
    if (t_own_ring == this) t_own_ring = nullptr;
    if (ring_.ring_fd > 0) io_uring_queue_exit(&ring_);
    free_accept_queues();
    free_recv_queues();
    if (evfd_ >= 0) (void)sys::close(evfd_);
    if (buf_ring_) (void)sys::munmap(buf_ring_, detail::buffer_pool::k_count * sizeof(io_uring_buf));
}

// Maps the pool and, where the kernel has provided-buffer rings (5.19), hands it every buffer.
long io_uring_engine::setup_pool() noexcept {
    if (long r = pool_.init(); r < 0) return r;
    constexpr unsigned n = detail::buffer_pool::k_count;
    void* p = sys::mmap(nullptr, n * sizeof(io_uring_buf), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (sys::is_error(p)) return 0;  // the free list serves instead
    auto* br = static_cast<io_uring_buf_ring*>(p);
    io_uring_buf_reg reg{};
    reg.ring_addr = reinterpret_cast<uint64_t>(br);
    reg.ring_entries = n;
    reg.bgid = 0;
    if (io_uring_register_buf_ring(&ring_, &reg, 0) != 0) {
        (void)sys::munmap(p, n * sizeof(io_uring_buf));
        return 0;
    }
    io_uring_buf_ring_init(br);
    for (unsigned i = 0; i < n; ++i)
        io_uring_buf_ring_add(br, pool_.at(i), detail::buffer_pool::k_size, static_cast<uint16_t>(i),
                              io_uring_buf_ring_mask(n), static_cast<int>(i));
    io_uring_buf_ring_advance(br, static_cast<int>(n));
    while (pool_.take() >= 0) {}  // the kernel has them all now
    buf_ring_ = br;
    return 0;
}

// A buffer is free again: a recv_pooled waiting for one (all were out) is run again. Not only
// from give_back: the engine frees buffers itself (read-ahead data copied out or dropped, a
// receive cancelled before data came), and a waiter left for the next give_back waited for
// nothing, or for ever when no buffer was held by a caller.
void io_uring_engine::recycle(unsigned id) noexcept {
    if (buf_ring_) {
        io_uring_buf_ring_add(buf_ring_, pool_.at(id), detail::buffer_pool::k_size, static_cast<uint16_t>(id),
                              io_uring_buf_ring_mask(detail::buffer_pool::k_count), 0);
        io_uring_buf_ring_advance(buf_ring_, 1);
    } else {
        pool_.put(id);
    }
    if (io_op* w = buffer_waiters_.pop_front()) queue(*w, false);
}

void io_uring_engine::give_back(void* buf) noexcept {
    long id = pool_.id_of(buf);
    if (id < 0) return;
    --pool_.out;
    recycle(static_cast<unsigned>(id));
}

// A recv_pooled waiting for a buffer is in no kernel request that closing its fd would cancel:
// it ends here, with EBADF as an op the close cancelled. Left waiting, the next buffer given
// back would run it on whatever file gets the number next, and hand it that file's data.
void io_uring_engine::fail_buffer_waiters(int fd) noexcept {
    intrusive_list<io_op, &io_op::hook> closed;
    buffer_waiters_.for_each([&](io_op& op) {
        if (op.fd != fd || op.fixed_file) return;
        buffer_waiters_.erase(op);
        closed.push_back(op);
    });
    while (io_op* op = closed.pop_front()) complete(*op, -EBADF);
}

io_uring_sqe* io_uring_engine::get_sqe() noexcept {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    while (!sqe) {
        // SQ ring full: hand what we have to the kernel and try again.
        io_uring_submit(&ring_);
        sqe = io_uring_get_sqe(&ring_);
        // Still full: the kernel took nothing. Older kernels (5.10 among them) take no
        // submission (EBUSY) while completions wait in their overflow list for room in the CQ
        // ring, which only reaping makes, so this looped for ever; an SQPOLL thread takes them
        // in its own time. The completions are set aside, not run: our callers are halfway
        // through queueing requests (cancel() queues two for one op).
        if (!sqe) stash_completions();
    }
    return sqe;
}

// Moves the CQ ring's completions to stashed_, for wait() to run in order; the kernel can then
// post the ones it holds back.
void io_uring_engine::stash_completions() noexcept {
    if (ring_batch_) {  // called under wait()'s on_cqe: give back the slots it has run first
        io_uring_cq_advance(&ring_, *ring_batch_);
        ring_batch_ = nullptr;  // and it stops reading the ring: the rest are stashed
    }
    unsigned head;
    io_uring_cqe* cqe;
    unsigned seen = 0;
    io_uring_for_each_cqe(&ring_, head, cqe) {
        try {
            stashed_.push_back({cqe->user_data, cqe->res, cqe->flags});
        } catch (...) {
            break;  // out of memory: they stay in the ring, and get_sqe tries again
        }
        ++seen;
    }
    io_uring_cq_advance(&ring_, seen);
}

// Runs the stashed completions in order, those their handlers stash included.
int io_uring_engine::run_stashed() noexcept {
    int n = 0;
    while (stashed_next_ < stashed_.size()) {
        const completion c = stashed_[stashed_next_++];
        on_cqe(c.tag, c.res, c.flags);
        ++n;
    }
    stashed_.clear();
    stashed_next_ = 0;
    return n;
}

// Runs what the CQ ring holds, in one pass that gives the slots back at its end. A handler may
// queue requests and get_sqe may then stash the rest of the ring (ring_batch_ tells it how many
// slots this pass has run, and it ends the pass).
int io_uring_engine::run_ring() noexcept {
    unsigned head;
    io_uring_cqe* cqe;
    unsigned seen = 0;
    ring_batch_ = &seen;
    io_uring_for_each_cqe(&ring_, head, cqe) {
        ++seen;  // taken: its fields are on_cqe's arguments, its slot may go back under it
        on_cqe(cqe->user_data, cqe->res, cqe->flags);
        if (!ring_batch_) return static_cast<int>(seen);  // the rest were stashed
    }
    ring_batch_ = nullptr;
    io_uring_cq_advance(&ring_, seen);
    return static_cast<int>(seen);
}

void io_uring_engine::arm_notify() noexcept {
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_read(sqe, evfd_, &ev_buf_, sizeof ev_buf_, 0);
    io_uring_sqe_set_data64(sqe, k_notify_tag);
}

void io_uring_engine::prep(io_uring_sqe* sqe, io_op& op) noexcept {
    // Offsets of -1 mean "current file position", which io_uring spells the same way.
    const auto off = static_cast<__u64>(op.offset);
    switch (op.code) {
        case opcode::nop: io_uring_prep_nop(sqe); break;
        case opcode::read: io_uring_prep_read(sqe, op.fd, op.buf, rw_len(op.len), off); break;
        case opcode::write: io_uring_prep_write(sqe, op.fd, op.buf, rw_len(op.len), off); break;
        case opcode::readv:
            io_uring_prep_readv(sqe, op.fd, static_cast<iovec*>(op.buf), static_cast<unsigned>(op.len), off);
            break;
        case opcode::writev:
            io_uring_prep_writev(sqe, op.fd, static_cast<iovec*>(op.buf), static_cast<unsigned>(op.len), off);
            break;
        case opcode::recv:
            // Tried at once, never IORING_RECVSEND_POLL_FIRST: ADR 0010, decision 2.
            io_uring_prep_recv(sqe, op.fd, op.buf, rw_len(op.len), op.flags);
            break;
        case opcode::recv_pooled:
            // With a buffer ring the kernel picks the buffer when data is there (the CQE names
            // it); without one, queue() took a buffer from the free list into op.buf.
            io_uring_prep_recv(sqe, op.fd, buf_ring_ ? nullptr : op.buf, detail::buffer_pool::k_size, op.flags);
            if (buf_ring_) {
                sqe->flags |= IOSQE_BUFFER_SELECT;
                sqe->buf_group = 0;
            }
            break;
        case opcode::send: io_uring_prep_send(sqe, op.fd, op.buf, rw_len(op.len), op.flags | MSG_NOSIGNAL); break;
        case opcode::recvmsg: io_uring_prep_recvmsg(sqe, op.fd, static_cast<msghdr*>(op.buf), op.flags); break;
        case opcode::sendmsg:
            io_uring_prep_sendmsg(sqe, op.fd, static_cast<msghdr*>(op.buf), op.flags | MSG_NOSIGNAL);
            break;
        case opcode::accept:
            io_uring_prep_accept(sqe, op.fd, static_cast<sockaddr*>(op.buf), op.addrlen, op.flags);
            break;
        case opcode::connect:
            io_uring_prep_connect(sqe, op.fd, static_cast<sockaddr*>(op.buf), static_cast<socklen_t>(op.len));
            break;
        case opcode::poll: io_uring_prep_poll_add(sqe, op.fd, op.poll_events); break;
        case opcode::fsync: io_uring_prep_fsync(sqe, op.fd, (op.flags & 1) ? IORING_FSYNC_DATASYNC : 0); break;
        case opcode::send_zc:
            io_uring_prep_send_zc(sqe, op.fd, op.buf, rw_len(op.len), op.flags | MSG_NOSIGNAL, 0);
            break;
        case opcode::openat:
            io_uring_prep_openat(sqe, op.fd, static_cast<const char*>(op.buf), op.flags,
                                 static_cast<mode_t>(op.len));
            break;
        case opcode::close: io_uring_prep_close(sqe, op.fd); break;
        case opcode::statx:
            io_uring_prep_statx(sqe, op.fd, static_cast<const char*>(op.buf), op.flags,
                                static_cast<unsigned>(op.len), static_cast<struct statx*>(op.buf2));
            break;
        case opcode::unlinkat: io_uring_prep_unlinkat(sqe, op.fd, static_cast<const char*>(op.buf), op.flags); break;
        case opcode::renameat:
            io_uring_prep_renameat(sqe, op.fd, static_cast<const char*>(op.buf), op.fd2,
                                   static_cast<const char*>(op.buf2), static_cast<unsigned>(op.flags));
            break;
        case opcode::mkdirat:
            io_uring_prep_mkdirat(sqe, op.fd, static_cast<const char*>(op.buf), static_cast<mode_t>(op.len));
            break;
        case opcode::fallocate:
            io_uring_prep_fallocate(sqe, op.fd, op.flags, off, static_cast<__u64>(op.len));
            break;
        case opcode::ftruncate:
            // liburing 2.3 has no helper: IORING_OP_FTRUNCATE takes the length in `off`.
            io_uring_prep_rw(k_op_ftruncate, sqe, op.fd, nullptr, 0, off);
            break;
        case opcode::read_fixed:
            io_uring_prep_read_fixed(sqe, op.fd, op.buf, rw_len(op.len), off, op.flags);
            break;
        case opcode::write_fixed:
            io_uring_prep_write_fixed(sqe, op.fd, op.buf, rw_len(op.len), off, op.flags);
            break;
    }
    if (op.fixed_file) sqe->flags |= IOSQE_FIXED_FILE;
    io_uring_sqe_set_data(sqe, &op);
}

// Prepares op, or its readiness poll when poll_phase.
void io_uring_engine::queue(io_op& op, bool poll_phase) noexcept {
    if (op.code == opcode::recv_pooled && !poll_phase && !buf_ring_) {
        long id = pool_.take();
        if (id < 0) {  // every buffer is out: run again when one comes back
            buffer_waiters_.push_back(op);
            return;
        }
        op.buf = pool_.at(static_cast<unsigned>(id));
        ++pool_.out;  // held by the kernel until the recv completes
    }
    count_in(op);
    io_uring_sqe* sqe = get_sqe();
    if (poll_phase) {
        io_uring_prep_poll_add(sqe, op.fd, static_cast<unsigned>(wanted_events(op)));
        // A registered file's fd is its index: without the flag the poll waited on whatever
        // file has that number in the process (or failed with EBADF).
        if (op.fixed_file) sqe->flags |= IOSQE_FIXED_FILE;
        io_uring_sqe_set_data64(sqe, reinterpret_cast<uint64_t>(&op) | k_poll_bit);
    } else {
        prep(sqe, op);
    }
}

result<void> io_uring_engine::register_buffers(const iovec* iov, unsigned n) noexcept {
    (void)io_uring_unregister_buffers(&ring_);
    if (n == 0) return {};
    int r = io_uring_register_buffers(&ring_, iov, n);
    return r < 0 ? result<void>(errno_error(-r)) : result<void>();
}

result<void> io_uring_engine::register_files(const int* fds, unsigned n) noexcept {
    (void)io_uring_unregister_files(&ring_);
    if (n == 0) return {};
    int r = io_uring_register_files(&ring_, fds, n);
    return r < 0 ? result<void>(errno_error(-r)) : result<void>();
}

long io_uring_engine::submit(io_op& op) noexcept {
    op.cancel_errno = 0;
    op.engine_busy = false;
    if (plain_[static_cast<unsigned>(op.code)] && !op.shared_recv) [[likely]] {
        prep(get_sqe(), op);
        count_in(op);
        return pending;
    }
    // An opcode this kernel lacks runs as a blocking syscall, like on epoll.
    if (!native_[static_cast<unsigned>(op.code)]) {
        // No SEND_ZC (before 6.0): a plain send on the ring. As a syscall it was one attempt
        // with MSG_DONTWAIT, so a socket without room failed it with EAGAIN instead of waiting.
        if (op.code == opcode::send_zc && plain_[static_cast<unsigned>(opcode::send)]) {
            op.code = opcode::send;
            return submit(op);
        }
        if (op.fixed_file) return -EOPNOTSUPP;
        return execute_blocking(op);
    }
    if (op.code == opcode::recv_pooled && !pool_.ready())
        if (long r = setup_pool(); r < 0) return r;
    if (op.code == opcode::accept)
        if (long r = submit_accept(op); r != k_single_shot) return r;
    if (op.shared_recv && (op.code == opcode::recv || op.code == opcode::recv_pooled))
        if (long r = submit_recv(op); r != k_single_shot) return r;
    if (op.code == opcode::poll && (op.poll_events & POLLIN) && holds_input(op.fd))
        return POLLIN;
    queue(op, false);
    if (is_positioned_io(op) && ++file_ios_queued_ == k_file_io_batch) {
        file_ios_queued_ = 0;
        io_uring_submit(&ring_);
    }
    return pending;
}

void io_uring_engine::cancel(io_op& op, int err) noexcept {
    if (op.cancel_errno) return;
    op.cancel_errno = err;
    if (cancel_accept_waiter(op, err)) return;  // waiting for a multishot accept: not in the kernel
    if (cancel_recv_waiter(op, err)) return;    // waiting for a multishot receive: the same
    if (op.code == opcode::recv_pooled && op.hook.linked()) {  // waiting for a buffer: not in the kernel
        buffer_waiters_.unlink(op);
        complete(op, -err);
        return;
    }
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_cancel64(sqe, reinterpret_cast<uint64_t>(&op), 0);
    io_uring_sqe_set_data64(sqe, k_ignore_tag);
    // Also cancels the op's readiness poll if it is in that phase.
    io_uring_sqe* sqe2 = get_sqe();
    io_uring_prep_cancel64(sqe2, reinterpret_cast<uint64_t>(&op) | k_poll_bit, 0);
    io_uring_sqe_set_data64(sqe2, k_ignore_tag);
}

void io_uring_engine::on_cqe(uint64_t tag, int res, unsigned flags) noexcept {
    if (tag == k_ignore_tag || tag == k_msg_wake_failed_tag) return;
    if (tag == k_msg_wake_tag) {
        notify_pending_.store(false, std::memory_order_relaxed);
        return;
    }
    if (tag == k_notify_tag) {
        notify_pending_.store(false, std::memory_order_relaxed);
        arm_notify();
        return;
    }
    if ((tag & 7) == k_accept_bit) {
        on_accept_cqe(reinterpret_cast<accept_queue*>(tag & ~k_accept_bit), res, flags);
        return;
    }
    if ((tag & 7) == k_recv_bits) {
        on_recv_cqe(reinterpret_cast<recv_queue*>(tag & ~k_recv_bits), res, flags);
        return;
    }
    if (tag & k_poll_bit) {
        auto* op = reinterpret_cast<io_op*>(tag & ~k_poll_bit);
        if (res < 0 || op->cancel_errno) {
            if (res < 0 && !cancel_ended(*op, res)) op->cancel_errno = 0;  // its own error, not the cancel's
            complete(*op, cancelled_result(*op, res < 0 ? res : -ECANCELED));
            return;
        }
        if (op->engine_busy) {  // a non-blocking connect finished: its outcome is SO_ERROR
            if (!op->fixed_file) {
                complete(*op, sys::socket_error(op->fd));
                return;
            }
            // A registered file has no fd to ask SO_ERROR of (its fd is an index): connect
            // again, which reports the outcome (below).
            queue(*op, false);
            return;
        }
        queue(*op, false);  // ready now: run the op itself again
        return;
    }
    auto* op = reinterpret_cast<io_op*>(tag);
    if (op->code == opcode::recv_pooled && !on_pooled_cqe(*op, res, flags)) return;
    if (op->code == opcode::send_zc) {
        // SEND_ZC: the result comes first (with F_MORE), the buffer is free only at the
        // notification; complete the op then, with the result held back.
        if (flags & IORING_CQE_F_MORE) {
            op->engine_result = res;
            return;
        }
        if (flags & IORING_CQE_F_NOTIF) res = static_cast<int>(op->engine_result);
    }
    long r = cancelled_result(*op, res);
    if (r == -EOPNOTSUPP && op->code == opcode::send_zc && !op->cancel_errno) {
        op->code = opcode::send;  // not a socket type with zero-copy (e.g. AF_UNIX): copy
        queue(*op, false);
        return;
    }
    // Only a registered file's connect comes back here once busy (it was run again after its
    // poll): EALREADY is still under way, EISCONN is connected.
    if (op->engine_busy && !op->cancel_errno) {
        if (r == -EALREADY) {
            queue(*op, true);
            return;
        }
        if (r == -EISCONN) r = 0;
    }
    // A connect's EAGAIN (a Unix listener's full backlog, on an O_NONBLOCK socket) is its
    // result: it started nothing, and no readiness ends it (the socket polls writable whatever
    // the backlog, so polling and connecting again spun until the deadline), so the caller tries
    // again (run_connect). A blocking socket's connect waits in the kernel instead.
    const bool not_ready = r == -EINPROGRESS || (r == -EAGAIN && op->code != opcode::connect);
    if (not_ready && is_socket_like(op->code)) {
        // Cancelled meanwhile (its SQE went to the kernel together with the cancel, which then
        // found nothing to stop): it has not finished, so it ends as cancelled, not with an
        // EAGAIN its caller never asked to see (ECANCELED would leave the interrupt pending).
        if (op->cancel_errno) {
            complete(*op, -op->cancel_errno);
            return;
        }
        // The fd is O_NONBLOCK, so the kernel would not wait for us: wait for readiness, then
        // run the op again (a connect under way, EINPROGRESS, is finished by the poll: see
        // above).
        if (r == -EINPROGRESS) op->engine_busy = true;
        queue(*op, true);
        return;
    }
    // The op finished before a cancel could stop it: its result is its own (a kernel's
    // ETIMEDOUT stays the kernel's, see io_op::cancel_errno).
    if (!cancel_ended(*op, res)) op->cancel_errno = 0;
    complete(*op, r);
}

void io_uring_engine::count_in(io_op& op) noexcept {
    if (op.engine_counted || op.fd < 0 || op.fixed_file) return;
    const auto fd = static_cast<size_t>(op.fd);
    if (fd >= in_kernel_.size()) {
        try {
            in_kernel_.resize(std::max(fd + 1, in_kernel_.size() * 2));
        } catch (...) {
            return;  // not counted: closing it will not cancel it (as before counting)
        }
    }
    ++in_kernel_[fd];
    op.engine_counted = true;
}

void io_uring_engine::count_out(io_op& op) noexcept {
    if (!op.engine_counted) return;
    op.engine_counted = false;
    --in_kernel_[static_cast<size_t>(op.fd)];
}

// Before close(2): the kernel finds the requests by the file the fd names, so they are
// cancelled while it still names it. They complete with ECANCELED and no cancel_errno of
// ours, which cancelled_result reports as EBADF.
void io_uring_engine::cancel_in_kernel(int fd) noexcept {
    if (fd < 0 || static_cast<size_t>(fd) >= in_kernel_.size() || in_kernel_[static_cast<size_t>(fd)] == 0) return;
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_cancel_fd(sqe, fd, IORING_ASYNC_CANCEL_ALL);
    io_uring_sqe_set_data64(sqe, k_ignore_tag);
    io_uring_submit(&ring_);
}

// A recv_pooled's completion: with data, the buffer is handed out in op.buf; otherwise any
// buffer it took goes back. False when the op now waits for a buffer (all are out).
bool io_uring_engine::on_pooled_cqe(io_op& op, int& res, unsigned flags) noexcept {
    long id = -1;
    if (buf_ring_) {
        if (flags & IORING_CQE_F_BUFFER) id = static_cast<long>(flags >> IORING_CQE_BUFFER_SHIFT);
    } else {
        id = pool_.id_of(op.buf);
    }
    if (res > 0 && id >= 0) {
        op.buf = pool_.at(static_cast<unsigned>(id));
        if (buf_ring_) ++pool_.out;  // (the free list's was counted when queue() took it)
        return true;
    }
    if (id >= 0) {
        if (!buf_ring_) --pool_.out;
        recycle(static_cast<unsigned>(id));
    }
    op.buf = nullptr;
    if (res == -ENOBUFS && buf_ring_ && !op.cancel_errno) {
        buffer_waiters_.push_back(op);
        return false;
    }
    return true;
}

int io_uring_engine::wait(int64_t timeout_ns) noexcept {
    io_uring_cqe* cqe = nullptr;
    file_ios_queued_ = 0;
    if (stashed_next_ < stashed_.size()) timeout_ns = 0;  // completions are waiting already
    if (timeout_ns == 0) {
        // Nothing to submit and, by the kernel's own flag, nothing to reap: skip the system
        // call. An idle vCPU polls like this before and after every spin for cross-vCPU work,
        // and a busy one every few hundred fiber switches.
        if (taskrun_flag_ && io_uring_sq_ready(&ring_) == 0 && !has_pending()) return 0;
        io_uring_submit_and_get_events(&ring_);
    } else if (timeout_ns < 0) {
        io_uring_submit_and_wait(&ring_, 1);
    } else {
        __kernel_timespec ts{timeout_ns / 1'000'000'000, timeout_ns % 1'000'000'000};
        io_uring_submit_and_wait_timeout(&ring_, &cqe, 1, &ts, nullptr);
    }
    int n = 0;
    if (stashed_next_ < stashed_.size()) n += run_stashed();  // older than the ring's
    n += run_ring();
    if (stashed_next_ < stashed_.size()) n += run_stashed();  // what its handlers set aside
    return n;
}

bool io_uring_engine::has_pending() noexcept {
    // Completions get_sqe set aside, ones already in the CQ ring, or deferred ones the kernel
    // will post on our next io_uring_enter (it raises IORING_SQ_TASKRUN for those).
    return stashed_next_ < stashed_.size() || io_uring_cq_ready(&ring_) > 0 ||
           (IO_URING_READ_ONCE(*ring_.sq.kflags) & (IORING_SQ_TASKRUN | IORING_SQ_CQ_OVERFLOW));
}

// A vCPU with a ring of its own wakes another's with IORING_OP_MSG_RING: a completion posted
// straight into the target's ring. Asleep on both sides (no idle spin, two pinned vCPUs), a
// round trip took 57.1 us this way against 75.3 us through the eventfd (medians; floors 54.5
// and 71.9 us, bench/task/wake_floor.c, ADR 0019). Other threads, and targets without DEFER_TASKRUN (where the kernel
// may retry the message later from a worker), use the eventfd.
bool io_uring_engine::wake_by_msg_ring(io_uring_engine& target) noexcept {
    io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
    if (!sqe) return false;
    io_uring_prep_msg_ring(sqe, target.ring_.ring_fd, 0, k_msg_wake_tag, 0);
    sqe->flags |= IOSQE_CQE_SKIP_SUCCESS;
    io_uring_sqe_set_data64(sqe, k_msg_wake_failed_tag);
    if (io_uring_submit(&ring_) < 0) return false;  // (the SQE stays queued: a spare wake-up)
    // The message is issued inline; had it failed, its completion is in our ring by now.
    unsigned head;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(&ring_, head, cqe) {
        if (cqe->user_data == k_msg_wake_failed_tag) return false;
    }
    return true;
}

void io_uring_engine::notify() noexcept {
    if (notify_pending_.exchange(true, std::memory_order_acq_rel)) return;
    if (io_uring_engine* own = t_own_ring; own && own != this && deferred_ && own->wake_by_msg_ring(*this))
        return;
    uint64_t one = 1;
    (void)sys::write(evfd_, &one, sizeof one, -1);
}

}  // namespace gluon::engine
