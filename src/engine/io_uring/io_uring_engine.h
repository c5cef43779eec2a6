// io_uring engine: one ring per vCPU, SINGLE_ISSUER|DEFER_TASKRUN where the kernel has it
// (COOP_TASKRUN otherwise), registered ring fd, submissions batched until the vCPU runs out of
// ready fibers, ASYNC_CANCEL, and an eventfd read kept posted for cross-thread
// wake-ups. liburing is used here and nowhere else in gluon.
#pragma once

#include <liburing.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "../buffer_pool.h"
#include "gluon/engine/engine.h"

namespace gluon::engine {

class io_uring_engine final : public engine {
public:
    static result<std::unique_ptr<engine>> create(const options& opts);
    ~io_uring_engine() override;

    kind type() const noexcept override { return kind::io_uring; }
    const char* name() const noexcept override { return "io_uring"; }
    long submit(io_op& op) noexcept override;
    void cancel(io_op& op, int err) noexcept override;
    // Timeouts run on the vCPU's timer heap (an expiry cancels the op), not as linked timeout
    // SQEs: a kernel hrtimer armed and cancelled per timed op cost 14% of an HTTP server's
    // requests per CPU-second (ADR 0015).

    int wait(int64_t timeout_ns) noexcept override;
    void notify() noexcept override;
    void forget_fd(int fd, bool closing) noexcept override {
        // Buffer waiters first: the buffers the dropped queues free would run fd's again.
        fail_buffer_waiters(fd);
        drop_accept_queue(fd);
        drop_recv_queue(fd);
        if (closing) cancel_in_kernel(fd);
    }
    void flush() noexcept override { io_uring_submit(&ring_); }
    bool holds_input(int fd) const noexcept override { return accepts_queued(fd) || recv_queued(fd); }
    bool has_pending() noexcept override;
    bool pending_hint_is_exact() const noexcept override { return taskrun_flag_; }

    bool native(opcode c) const noexcept override { return native_[static_cast<unsigned>(c)]; }
    int pollable_fd() const noexcept override { return ring_.ring_fd; }
    result<void> register_buffers(const iovec* iov, unsigned n) noexcept override;
    result<void> register_files(const int* fds, unsigned n) noexcept override;
    void give_back(void* buf) noexcept override;
    unsigned pooled_buffers_out() const noexcept override { return pool_.out; }

    /// Setup flags that were accepted by the kernel (for diagnostics and tests).
    unsigned setup_flags() const noexcept { return ring_.flags; }

private:
    // user_data tags that are not io_op pointers (pointers are 8-aligned, these are not).
    static constexpr uint64_t k_ignore_tag = 1;
    static constexpr uint64_t k_notify_tag = 3;
    // A wake-up another vCPU's ring sent with IORING_OP_MSG_RING; and, on the sender's ring, one
    // that failed (the success completion is skipped).
    static constexpr uint64_t k_msg_wake_tag = 5;
    static constexpr uint64_t k_msg_wake_failed_tag = 7;
    // An io_op pointer with this bit set is the op's readiness poll (non-blocking fd on EAGAIN).
    static constexpr uint64_t k_poll_bit = 4;
    // An accept_queue pointer with this bit set: its multishot accept (multishot_accept.cc).
    static constexpr uint64_t k_accept_bit = 2;
    // A recv_queue pointer with these bits set: its multishot receive (multishot_recv.cc).
    static constexpr uint64_t k_recv_bits = 6;

    // A completion as the CQ ring holds it.
    struct completion {
        uint64_t tag;
        int res;
        unsigned flags;
    };

    io_uring_engine() = default;
    io_uring_sqe* get_sqe() noexcept;
    void stash_completions() noexcept;
    int run_stashed() noexcept;
    int run_ring() noexcept;
    void prep(io_uring_sqe* sqe, io_op& op) noexcept;
    void arm_notify() noexcept;
    bool wake_by_msg_ring(io_uring_engine& target) noexcept;
    void on_cqe(uint64_t tag, int res, unsigned flags) noexcept;
    void queue(io_op& op, bool poll_phase) noexcept;
    // Operations of each fd in the kernel (single-shot ones: the multishot queues keep their
    // own): closing an fd with some cancels them first, or they would hold the file open and
    // wait on until data came.
    void count_in(io_op& op) noexcept;
    void count_out(io_op& op) noexcept;
    void cancel_in_kernel(int fd) noexcept;
    void complete(io_op& op, long r) noexcept {
        count_out(op);
        op.on_complete(&op, r);
    }
    long setup_pool() noexcept;
    bool on_pooled_cqe(io_op& op, int& res, unsigned flags) noexcept;
    void recycle(unsigned id) noexcept;
    void fail_buffer_waiters(int fd) noexcept;

    // Multishot accept (multishot_accept.cc): one accept armed per listening socket; the
    // connections no accept op waits for queue in its accept_queue.
    struct accept_queue;
    static constexpr long k_single_shot = -1000000;  // submit_accept: take the usual path
    long submit_accept(io_op& op) noexcept;
    bool cancel_accept_waiter(io_op& op, int err) noexcept;
    bool accepts_queued(int fd) const noexcept;
    void on_accept_cqe(accept_queue* q, int res, unsigned flags) noexcept;
    void drop_accept_queue(int fd) noexcept;
    void free_accept_queues() noexcept;
    void arm_accept(accept_queue& q) noexcept;
    void cancel_accept(accept_queue& q) noexcept;
    static uint64_t accept_tag(accept_queue& q) noexcept;

    // Multishot receive (multishot_recv.cc): one receive armed per socket whose reads ask for
    // it (io_op::shared_recv); data no recv op waits for queues in its recv_queue.
    struct recv_queue;
    long submit_recv(io_op& op) noexcept;
    bool cancel_recv_waiter(io_op& op, int err) noexcept;
    bool recv_queued(int fd) const noexcept;
    void on_recv_cqe(recv_queue* q, int res, unsigned flags) noexcept;
    void drop_recv_queue(int fd) noexcept;
    void free_recv_queues() noexcept;
    void arm_recv(recv_queue& q) noexcept;
    void cancel_recv(recv_queue& q) noexcept;
    void fall_back_to_single_recvs(recv_queue& q) noexcept;
    size_t copy_queued(recv_queue& q, char* out, size_t n) noexcept;
    long hand_over_queued(recv_queue& q, io_op& op) noexcept;
    void serve_kept(recv_queue& q) noexcept;
    void finish_recv_cqe(recv_queue& q) noexcept;
    static uint64_t recv_tag(recv_queue& q) noexcept;

    io_uring ring_{};
    int evfd_ = -1;
    uint64_t ev_buf_ = 0;
    std::atomic<bool> notify_pending_{false};
    bool taskrun_flag_ = false;
    // DEFER_TASKRUN: only the creating thread submits, and an IORING_OP_MSG_RING from another
    // ring reaches this one through the kernel's task work, without locks or retries.
    bool deferred_ = false;
    unsigned file_ios_queued_ = 0;  // positioned file I/Os queued since the last wait()
    bool native_[k_opcode_count] = {};  // probed opcodes
    bool plain_[k_opcode_count] = {};   // native and queued as they are (plain_opcode)
    // recv_pooled's buffers: handed to the kernel in a provided-buffer ring (group 0) where it
    // has them, so that a recv waiting for data holds none; otherwise taken from the pool's
    // free list when the recv is queued.
    detail::buffer_pool pool_;
    io_uring_buf_ring* buf_ring_ = nullptr;
    intrusive_list<io_op, &io_op::hook> buffer_waiters_;  // recv_pooled ops with every buffer out
    std::vector<accept_queue*> accepts_;  // by listening fd
    std::vector<accept_queue*> dropped_accepts_;  // closed, their cancelled accept not yet ended
    std::vector<recv_queue*> recvs_;  // by socket fd
    std::vector<uint32_t> in_kernel_;  // by fd: count_in
    std::vector<recv_queue*> dropped_recvs_;  // closed, their cancelled receive not yet ended
    // Completions get_sqe took out of the CQ ring to make room, oldest first; wait() runs them
    // (from stashed_next_) before any left in the ring.
    std::vector<completion> stashed_;
    size_t stashed_next_ = 0;
    unsigned* ring_batch_ = nullptr;  // while run_ring runs: how many ring slots it has run
};

}  // namespace gluon::engine
