// Multishot accept (IORING_ACCEPT_MULTISHOT, kernel 5.19): one accept armed per listening socket
// delivers every connection that arrives, where a single-shot accept is one submission (and,
// with the backlog empty, one internal poll armed and torn down) per connection. Connections
// that arrive while no accept op waits queue here, up to k_max_ready; then the accept is
// cancelled and the kernel's backlog holds the rest until the next accept arms it again.
//
// Only accepts that ask for it (io_op::shared_accept: net::listener::accept() without a peer)
// use it: one sockaddr buffer cannot serve many completions, and a program that waits for a
// listener's readability before it accepts (poll, then accept: the POSIX facade's callers) would
// wait for connections already taken. A readiness poll on a listener with connections queued
// here completes at once all the same.
#include <algorithm>
#include <deque>

#include "gluon/sys/ops.h"
#include "io_uring_engine.h"

namespace gluon::engine {

struct io_uring_engine::accept_queue {
    int fd = -1;
    int flags = 0;
    uint32_t gen = 0;       // fd_generation(fd) when made: the fd closed since is another file
    bool armed = false;     // a multishot accept is in the kernel (until a CQE without F_MORE)
    bool cancelling = false;  // cancelled (ready full, or nobody waits any more)
    bool single = false;    // the kernel refused multishot here: single-shot accepts
    bool detached = false;  // its fd was closed: freed at the final completion
    std::deque<int> ready;  // accepted, not yet taken
    intrusive_list<io_op, &io_op::hook> waiters;
};

namespace {
constexpr size_t k_max_ready = 64;
}

uint64_t io_uring_engine::accept_tag(accept_queue& q) noexcept {
    return reinterpret_cast<uint64_t>(&q) | k_accept_bit;
}

void io_uring_engine::arm_accept(accept_queue& q) noexcept {
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_multishot_accept(sqe, q.fd, nullptr, nullptr, q.flags);
    io_uring_sqe_set_data64(sqe, accept_tag(q));
    q.armed = true;
    q.cancelling = false;
}

void io_uring_engine::cancel_accept(accept_queue& q) noexcept {
    io_uring_sqe* sqe = get_sqe();
    io_uring_prep_cancel64(sqe, accept_tag(q), 0);
    io_uring_sqe_set_data64(sqe, k_ignore_tag);
}

long io_uring_engine::submit_accept(io_op& op) noexcept {
    if (!op.shared_accept || op.fd < 0 || op.buf || op.fixed_file) return k_single_shot;
    const auto idx = static_cast<size_t>(op.fd);
    if (idx >= accepts_.size()) accepts_.resize(idx + 16, nullptr);
    accept_queue*& q = accepts_[idx];
    const uint32_t gen = fd_generation(op.fd);
    if (q && q->gen != gen) drop_accept_queue(op.fd);  // closed (on another vCPU) and reused
    if (!q) {
        q = new (std::nothrow) accept_queue;
        if (!q) return k_single_shot;
        q->fd = op.fd;
        q->flags = op.flags;
        q->gen = gen;
    }
    if (q->single || q->flags != op.flags) return k_single_shot;
    if (!q->ready.empty()) {
        const int fd = q->ready.front();
        q->ready.pop_front();
        return fd;
    }
    q->waiters.push_back(op);
    if (!q->armed) arm_accept(*q);
    return pending;
}

bool io_uring_engine::accepts_queued(int fd) const noexcept {
    return fd >= 0 && static_cast<size_t>(fd) < accepts_.size() && accepts_[fd] && !accepts_[fd]->ready.empty();
}

// A waiting accept op cancelled (interrupt, timeout). If nobody waits any more (and then nothing
// is queued either: a connection goes to a waiter first), the armed accept is cancelled too, at
// once: a server stops by interrupting its accepting fiber and then closing the listener,
// maybe from another vCPU, whose engine cannot reach this one's armed accept.
bool io_uring_engine::cancel_accept_waiter(io_op& op, int err) noexcept {
    if (op.code != opcode::accept || !op.hook.linked()) return false;
    intrusive_list<io_op, &io_op::hook>::unlink(op);
    accept_queue* q = static_cast<size_t>(op.fd) < accepts_.size() ? accepts_[op.fd] : nullptr;
    if (q && q->waiters.empty() && q->armed && !q->cancelling) {
        cancel_accept(*q);
        q->cancelling = true;
        io_uring_submit_and_get_events(&ring_);
    }
    op.on_complete(&op, -err);
    return true;
}

void io_uring_engine::on_accept_cqe(accept_queue* q, int res, unsigned flags) noexcept {
    if (!(flags & IORING_CQE_F_MORE)) q->armed = false;
    if (!q->detached && fd_generation(q->fd) != q->gen) {
        // The listener was closed on another vCPU: what it accepted goes with it.
        if (res >= 0) (void)sys::close(res);
        drop_accept_queue(q->fd);  // frees q, or keeps it detached until its final completion
        return;
    }
    if (q->detached) {
        if (res >= 0) (void)sys::close(res);
        if (!q->armed) {
            std::erase(dropped_accepts_, q);
            delete q;
        }
        return;
    }
    if (res >= 0) {
        if (io_op* op = q->waiters.pop_front()) {
            op->on_complete(op, res);
        } else {
            q->ready.push_back(res);
            if (q->ready.size() >= k_max_ready && q->armed && !q->cancelling) {
                cancel_accept(*q);
                q->cancelling = true;
            }
        }
    } else if (res == -EINVAL && q->ready.empty() && !q->single) {
        // A kernel without multishot accept (or not a listening socket: the single-shot
        // accept then says so to the waiter).
        q->single = true;
        while (io_op* op = q->waiters.pop_front()) queue(*op, false);
        return;
    } else if (res != -ECANCELED) {
        // EMFILE and the like end the multishot: one waiter hears of it (a server backs off).
        if (io_op* op = q->waiters.pop_front()) op->on_complete(op, res);
    }
    if (!q->armed) {
        q->cancelling = false;
        if (!q->waiters.empty()) arm_accept(*q);
    }
}

// The listening fd is closing (or was closed and reused): waiters fail with EBADF, queued
// connections are closed, and the armed accept, which holds the socket open, is cancelled
// now, its deferred completion run too, so that close(2) right after releases the port (a
// server that closes its listener and listens again on the same port must not get EADDRINUSE).
void io_uring_engine::drop_accept_queue(int fd) noexcept {
    if (fd < 0 || static_cast<size_t>(fd) >= accepts_.size() || !accepts_[fd]) return;
    accept_queue* q = std::exchange(accepts_[fd], nullptr);
    while (io_op* op = q->waiters.pop_front()) op->on_complete(op, -EBADF);
    for (int c : q->ready) (void)sys::close(c);
    q->ready.clear();
    if (!q->armed) {
        delete q;
        return;
    }
    q->detached = true;
    dropped_accepts_.push_back(q);
    cancel_accept(*q);
    io_uring_submit_and_get_events(&ring_);
}

// At the engine's end (the ring is gone: no completion comes any more).
void io_uring_engine::free_accept_queues() noexcept {
    for (accept_queue* q : accepts_) {
        if (!q) continue;
        for (int c : q->ready) (void)sys::close(c);
        delete q;
    }
    for (accept_queue* q : dropped_accepts_) delete q;
    accepts_.clear();
    dropped_accepts_.clear();
}

}  // namespace gluon::engine
