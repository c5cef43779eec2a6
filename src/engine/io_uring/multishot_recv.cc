// Multishot receive (IORING_RECV_MULTISHOT with a provided-buffer ring, kernel 6.0): one
// receive armed per socket delivers every arrival of data into a buffer of the engine's pool,
// where a single-shot receive is one submission, and on an empty socket one internal poll armed
// and torn down, per message. A recv op copies from those buffers (a recv_pooled op is handed
// the buffer itself); what it has no room for, and
// data that arrives while no recv waits, is kept here for the next one. Past k_max_chunks
// buffers kept, the receive is cancelled: the socket's own buffer and TCP's window hold the
// rest until a recv arms it again.
//
// Only recvs that ask for it (io_op::shared_recv) use it: data taken ahead would be lost to a
// read of the socket made any other way. A readiness poll on a socket with data kept here
// completes at once all the same.
//
// A socket's first recv is single-shot; the multishot receive is armed from the second on.
// A socket whose data keeps filling whole buffers (a stream: an upload, a bulk transfer) goes
// back to single-shot receives for good, which take it in larger pieces and without a copy.
//
// Where multishot cannot run (no buffer ring, a kernel without it, a non-blocking socket, which
// ends it with EAGAIN), the recvs of that socket go the single-shot way; when the pool runs out
// of buffers (ENOBUFS ends the receive), the waiting recvs do, and the next recv arms it again.
#include <algorithm>
#include <cstring>

#include "gluon/sys/ops.h"
#include "io_uring_engine.h"

namespace gluon::engine {

struct io_uring_engine::recv_queue {
    struct chunk {
        uint16_t id;   // the pool buffer
        uint32_t off;  // bytes already taken
        uint32_t len;
    };
    int fd = -1;
    uint32_t gen = 0;         // fd_generation(fd) when made: the fd closed since is another file
    bool armed = false;       // a multishot receive is in the kernel (until a CQE without F_MORE)
    bool cancelling = false;  // cancelled (too much kept, or nobody waits any more)
    bool single = false;      // multishot cannot run on this socket: single-shot recvs
    bool detached = false;    // its fd was closed: freed at the final completion
    bool second = false;      // the socket's first recv has been made (single-shot)
    uint8_t full = 0;         // completions in a row that filled their buffer (a stream)
    int end = 0;              // after the kept data: 1 end of stream, or -errno (once)
    std::vector<chunk> kept;  // from kept_head on, in arrival order
    size_t kept_head = 0;
    intrusive_list<io_op, &io_op::hook> waiters;

    bool has_data() const noexcept { return kept_head < kept.size(); }
    /// Takes the front chunk off (its buffer is the caller's to give back or hand over).
    chunk pop_front() noexcept {
        chunk c = kept[kept_head];
        if (++kept_head == kept.size()) {
            kept.clear();
            kept_head = 0;
        }
        return c;
    }
};

namespace {
constexpr size_t k_max_chunks = 8;
constexpr uint8_t k_stream_run = 4;  // full buffers in a row that make a socket a stream
}

uint64_t io_uring_engine::recv_tag(recv_queue& q) noexcept { return reinterpret_cast<uint64_t>(&q) | k_recv_bits; }

void io_uring_engine::arm_recv(recv_queue& q) noexcept {
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_recv_multishot(sqe, q.fd, nullptr, 0, 0);
    sqe->flags |= IOSQE_BUFFER_SELECT;
    sqe->buf_group = 0;
    io_uring_sqe_set_data64(sqe, recv_tag(q));
    q.armed = true;
    q.cancelling = false;
}

void io_uring_engine::cancel_recv(recv_queue& q) noexcept {
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_cancel64(sqe, recv_tag(q), 0);
    io_uring_sqe_set_data64(sqe, k_ignore_tag);
    q.cancelling = true;
}

// Copies up to n kept bytes to out, giving back the buffers it empties.
size_t io_uring_engine::copy_queued(recv_queue& q, char* out, size_t n) noexcept {
    size_t done = 0;
    while (done < n && q.has_data()) {
        recv_queue::chunk& c = q.kept[q.kept_head];
        const size_t take = std::min<size_t>(n - done, c.len - c.off);
        std::memcpy(out + done, pool_.at(c.id) + c.off, take);
        done += take;
        c.off += static_cast<uint32_t>(take);
        if (c.off == c.len) {
            --pool_.out;
            recycle(q.pop_front().id);
        }
    }
    return done;
}

namespace {
// Completes a recv with no data (the end of the stream, an error): a pooled one holds no buffer.
void complete_empty(io_op& op, long r) noexcept {
    if (op.code == opcode::recv_pooled) op.buf = nullptr;
    op.on_complete(&op, r);
}
}  // namespace

// recv_pooled: hands the front kept buffer over whole (its taken part moved out of the way).
long io_uring_engine::hand_over_queued(recv_queue& q, io_op& op) noexcept {
    const recv_queue::chunk c = q.pop_front();
    char* b = pool_.at(c.id);
    if (c.off) std::memmove(b, b + c.off, c.len - c.off);
    op.buf = b;  // (still counted out: now the caller's)
    return static_cast<long>(c.len - c.off);
}

// The recvs still waiting while data is kept (fibers reading the socket at once) take it now,
// in order. Left waiting behind a first one that took only part of an arrival, the next
// arrival went to them ahead of the part kept, which a later recv got after it.
void io_uring_engine::serve_kept(recv_queue& q) noexcept {
    while (q.has_data()) {
        io_op* op = q.waiters.pop_front();
        if (!op) return;
        const long r = op->code == opcode::recv_pooled
                           ? hand_over_queued(q, *op)
                           : static_cast<long>(copy_queued(q, static_cast<char*>(op->buf), op->len));
        op->on_complete(op, r);
    }
}

long io_uring_engine::submit_recv(io_op& op) noexcept {
    const bool pooled = op.code == opcode::recv_pooled;
    if (op.flags != 0 || op.fd < 0 || op.fixed_file || (op.len == 0 && !pooled)) return k_single_shot;
    if (!pool_.ready())
        if (setup_pool() < 0) return k_single_shot;
    if (!buf_ring_) return k_single_shot;
    const auto idx = static_cast<size_t>(op.fd);
    if (idx >= recvs_.size()) recvs_.resize(idx + 16, nullptr);
    const uint32_t gen = fd_generation(op.fd);
    if (recvs_[idx] && recvs_[idx]->gen != gen) drop_recv_queue(op.fd);  // closed and reused
    recv_queue*& q = recvs_[idx];
    if (!q) {
        q = new (std::nothrow) recv_queue;
        if (!q) return k_single_shot;
        q->fd = op.fd;
        q->gen = gen;
    }
    if (!q->second) {
        // A connection's first read is single-shot: one that is closed after one request (HTTP's
        // Connection: close) would pay an armed receive's cancel at its close, and never use it.
        q->second = true;
        return k_single_shot;
    }
    if (q->has_data())
        return pooled ? hand_over_queued(*q, op) : static_cast<long>(copy_queued(*q, static_cast<char*>(op.buf), op.len));
    if (q->end) {
        const int e = q->end;
        if (e < 0) q->end = 0;  // an error is told once; the end of the stream to every read
        if (pooled) op.buf = nullptr;
        return e < 0 ? e : 0;
    }
    if (q->single && !q->armed) return k_single_shot;
    q->waiters.push_back(op);  // (single: behind the receive being cancelled, then single-shot)
    if (!q->armed && !q->single) arm_recv(*q);
    return pending;
}

bool io_uring_engine::recv_queued(int fd) const noexcept {
    if (fd < 0 || static_cast<size_t>(fd) >= recvs_.size() || !recvs_[fd]) return false;
    const recv_queue& q = *recvs_[fd];
    return q.has_data() || q.end != 0;
}

// A waiting recv cancelled (interrupt, timeout). If nobody waits any more, the armed receive is
// cancelled too: the socket may now be closed from anywhere, and an armed receive would hold it
// open.
bool io_uring_engine::cancel_recv_waiter(io_op& op, int err) noexcept {
    if ((op.code != opcode::recv && op.code != opcode::recv_pooled) || !op.shared_recv || !op.hook.linked())
        return false;
    intrusive_list<io_op, &io_op::hook>::unlink(op);
    recv_queue* q = static_cast<size_t>(op.fd) < recvs_.size() ? recvs_[op.fd] : nullptr;
    if (q && q->waiters.empty() && q->armed && !q->cancelling) cancel_recv(*q);
    // complete(), not on_complete: a pooled recv that went the single-shot way and found every
    // buffer out waits among the buffer waiters still counted in the kernel (count_in), and
    // left counted, every later close of the fd number sent the kernel a cancel for nothing.
    complete(op, -err);
    return true;
}

// The recvs waiting on q go the single-shot way (the multishot receive has ended and will not
// be armed for them).
void io_uring_engine::fall_back_to_single_recvs(recv_queue& q) noexcept {
    while (io_op* op = q.waiters.pop_front()) queue(*op, false);
}

void io_uring_engine::on_recv_cqe(recv_queue* q, int res, unsigned flags) noexcept {
    if (!(flags & IORING_CQE_F_MORE)) q->armed = false;
    const long id = (flags & IORING_CQE_F_BUFFER) ? static_cast<long>(flags >> IORING_CQE_BUFFER_SHIFT) : -1;
    if (q->detached || fd_generation(q->fd) != q->gen) {
        if (id >= 0) recycle(static_cast<unsigned>(id));
        if (!q->detached) {
            drop_recv_queue(q->fd);  // closed on another vCPU: frees q, or detaches it
            return;
        }
        if (!q->armed) {
            std::erase(dropped_recvs_, q);
            delete q;
        }
        return;
    }
    if (res > 0 && id >= 0) {
        // A stream (an upload, a bulk transfer) fills every buffer: single-shot receives take
        // it in larger pieces and without the copy, so the socket goes back to them.
        q->full = static_cast<size_t>(res) == detail::buffer_pool::k_size ? q->full + 1 : 0;
        if (q->full >= k_stream_run && !q->single) {
            q->single = true;
            if (q->armed && !q->cancelling) cancel_recv(*q);
        }
        recv_queue::chunk c{static_cast<uint16_t>(id), 0, static_cast<uint32_t>(res)};
        io_op* op = q->waiters.pop_front();
        if (op && op->code == opcode::recv_pooled) {  // (a waiter means nothing was kept)
            op->buf = pool_.at(c.id);
            ++pool_.out;  // the caller's now
            op->on_complete(op, res);
            return finish_recv_cqe(*q);
        }
        if (op) {
            const size_t take = std::min<size_t>(op->len, c.len);
            std::memcpy(op->buf, pool_.at(c.id), take);
            c.off = static_cast<uint32_t>(take);
        }
        if (c.off < c.len) {
            q->kept.push_back(c);
            ++pool_.out;
            if (q->kept.size() - q->kept_head >= k_max_chunks && q->armed && !q->cancelling) cancel_recv(*q);
        } else {
            recycle(c.id);
        }
        if (op) op->on_complete(op, static_cast<long>(c.off));
        serve_kept(*q);
    } else if (res == 0) {
        q->end = 1;  // end of stream: every waiting recv, and every later one, reads 0
        while (io_op* op = q->waiters.pop_front()) complete_empty(*op, 0);
    } else if (res == -ENOBUFS) {
        // Every pool buffer is out: the recvs waiting now take the single-shot way, and the next
        // one arms the multishot again.
        if (!q->armed) fall_back_to_single_recvs(*q);
        return;
    } else if (res == -EINVAL || res == -EAGAIN || res == -EOPNOTSUPP) {
        // No multishot receive for this socket: a kernel without it, a non-blocking socket (its
        // single-shot recvs wait for readiness instead) or not a stream socket.
        q->single = true;
        if (!q->armed) fall_back_to_single_recvs(*q);
        return;
    } else if (res != -ECANCELED) {
        if (io_op* op = q->waiters.pop_front())
            complete_empty(*op, res);
        else
            q->end = res;
    } else if (id >= 0) {
        recycle(static_cast<unsigned>(id));
    }
    finish_recv_cqe(*q);
}

// After a completion: an ended receive is armed again for the recvs still waiting, or they go
// the single-shot way.
void io_uring_engine::finish_recv_cqe(recv_queue& q) noexcept {
    if (q.armed) return;
    q.cancelling = false;
    if (q.single)
        fall_back_to_single_recvs(q);
    else if (!q.waiters.empty() && !q.end)
        arm_recv(q);
}

// The socket is closing (or was closed and reused): waiters fail with EBADF, kept data is
// dropped, and the armed receive, which holds the socket open, is cancelled now, its deferred
// completion run too, so that close(2) right after closes the connection.
void io_uring_engine::drop_recv_queue(int fd) noexcept {
    if (fd < 0 || static_cast<size_t>(fd) >= recvs_.size() || !recvs_[fd]) return;
    recv_queue* q = std::exchange(recvs_[fd], nullptr);
    while (io_op* op = q->waiters.pop_front()) op->on_complete(op, -EBADF);
    for (size_t i = q->kept_head; i < q->kept.size(); ++i) {
        --pool_.out;
        recycle(q->kept[i].id);
    }
    q->kept.clear();
    if (!q->armed) {
        delete q;
        return;
    }
    q->detached = true;
    dropped_recvs_.push_back(q);
    cancel_recv(*q);
    io_uring_submit_and_get_events(&ring_);
}

// At the engine's end (the ring is gone: no completion comes any more).
void io_uring_engine::free_recv_queues() noexcept {
    for (recv_queue* q : recvs_) delete q;
    for (recv_queue* q : dropped_recvs_) delete q;
    recvs_.clear();
    dropped_recvs_.clear();
}

}  // namespace gluon::engine
