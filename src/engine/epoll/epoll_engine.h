// epoll engine: emulates completions with readiness. An op is tried at once with a non-blocking
// syscall; on EAGAIN it waits on its fd's list until epoll reports readiness, then it is retried.
// fds are registered once, edge-triggered, for both directions, and made O_NONBLOCK on first use.
//
// A read on a stream socket that comes back short (or with EAGAIN) emptied the socket; with
// edge triggering any data that arrives after it raises a new edge. Until that edge, the next
// read waits at once instead of trying (and failing with EAGAIN) first: one syscall fewer per
// received message in request/response traffic (ADR 0010).
#pragma once

#include <sys/epoll.h>

#include <vector>

#include "../buffer_pool.h"
#include "gluon/engine/engine.h"

namespace gluon::engine {

class epoll_engine final : public engine {
public:
    static result<std::unique_ptr<engine>> create(const options& opts);
    ~epoll_engine() override;

    kind type() const noexcept override { return kind::epoll; }
    const char* name() const noexcept override { return "epoll"; }
    long submit(io_op& op) noexcept override;
    void cancel(io_op& op, int err) noexcept override;
    int wait(int64_t timeout_ns) noexcept override;
    void notify() noexcept override;
    void forget_fd(int fd, bool closing) noexcept override;
    void give_back(void* buf) noexcept override;
    unsigned pooled_buffers_out() const noexcept override { return pool_.out; }

private:
    using op_list = intrusive_list<io_op, &io_op::hook>;
    struct fd_state {
        bool registered = false;
        bool stream = false;   // a SOCK_STREAM socket: a short read means its queue is empty
        bool drained = false;  // the last read found its queue empty; no input edge since
        bool hup = false;      // the peer closed or an error is pending: no edge will follow
        uint32_t gen = 0;  // fd_generation() when registered: another vCPU may have closed it
        op_list readers;
        op_list writers;
        op_list pollers;
    };

    epoll_engine(int epfd, int evfd) : epfd_(epfd), evfd_(evfd) {}
    fd_state* state_for(int fd) noexcept;
    long register_fd(int fd, fd_state& st) noexcept;
    int retry(op_list& list, fd_state& st) noexcept;
    long exec_tracked(io_op& op, fd_state& st) noexcept;
    long recv_pooled(io_op& op) noexcept;
    int run_unparked() noexcept;
    void fail_waiters(int fd, fd_state* st) noexcept;

    int epfd_;
    int evfd_;
    // wait()'s events. Not on its stack: wait() runs on the stack of whichever fiber parks when
    // nothing is ready, and 3 KiB there cost most fibers of a server a stack page more (an idle
    // echo connection 7.2 KiB instead of 4.0). wait() is not re-entered (what it calls makes
    // fibers ready; none of it waits).
    static constexpr int k_events = 256;
    epoll_event evs_[k_events];
    std::vector<fd_state*> fds_;  // indexed by fd; allocated on first use
    // recv_pooled takes a buffer only once its socket is readable; with every buffer out it
    // waits here, and moves to `unparked_` (run again by the next wait()) when one comes back.
    detail::buffer_pool pool_;
    op_list buffer_waiters_;
    op_list unparked_;
};

}  // namespace gluon::engine
