// Awaitable I/O for tasks: the operations fibers have in gluon/runtime/fd.h, on the vCPU's
// engine, each with an optional timeout (ETIMEDOUT). Cancelling the task cancels the engine
// operation in flight (ECANCELED); its completion is awaited either way, so no buffer is
// written after the await returns.
#pragma once

#include <sys/socket.h>

#include <coroutine>
#include <string_view>
#include <utility>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/engine/engine.h"
#include "gluon/runtime/vcpu_call.h"
#include "gluon/task/task.h"

namespace gluon::co {

/// Awaits one engine operation: co_await gives its result (>= 0, or -errno). Errors: the
/// operation's, ETIMEDOUT, ECANCELED, EPERM (not on a vCPU).
class [[nodiscard]] op_awaitable : task_detail::cancel_hook {
public:
    explicit op_awaitable(const engine::io_op& op, duration timeout = forever,
                          engine::engine* eng = nullptr) noexcept
        : op_(op), timeout_(timeout), eng_(eng) {}
    op_awaitable(const op_awaitable&) = delete;

    bool await_ready() const noexcept { return false; }
    template <typename P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
        return start(h, task_detail::ctx_of(h));
    }
    long await_resume() const noexcept { return res_; }

protected:
    const engine::io_op& op() const noexcept { return op_; }
    engine::engine* eng() const noexcept { return eng_; }

private:
    bool start(std::coroutine_handle<> h, task_detail::task_ctx* ctx) noexcept;
    static void on_complete(engine::io_op* op, long r);
    engine::io_op op_;
    duration timeout_;
    engine::engine* eng_;
    std::coroutine_handle<> h_;
    task_detail::task_ctx* ctx_ = nullptr;
    long res_ = 0;
    vcpu_timer timer_;
};

/// op_awaitable whose result is a result<R> (R an integer type, or void).
template <typename R>
class [[nodiscard]] io_awaitable : public op_awaitable {
public:
    using op_awaitable::op_awaitable;
    result<R> await_resume() const noexcept {
        const long r = op_awaitable::await_resume();
        if constexpr (std::is_void_v<R>)
            return void_from_syscall(r);
        else
            return from_syscall<R>(r);
    }
};

/// What recv_pooled received: a buffer of the vCPU engine's pool, given back to the engine when
/// this is destroyed or reset (on the vCPU that received it). Empty at the end of the stream.
class pooled_buffer {
public:
    pooled_buffer() = default;
    pooled_buffer(engine::engine* e, char* data, size_t size) noexcept : eng_(e), data_(data), size_(size) {}
    pooled_buffer(pooled_buffer&& o) noexcept
        : eng_(std::exchange(o.eng_, nullptr)), data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
    pooled_buffer& operator=(pooled_buffer&& o) noexcept {
        if (this != &o) {
            reset();
            eng_ = std::exchange(o.eng_, nullptr);
            data_ = std::exchange(o.data_, nullptr);
            size_ = std::exchange(o.size_, 0);
        }
        return *this;
    }
    ~pooled_buffer() { reset(); }

    char* data() const noexcept { return data_; }
    size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }
    std::string_view view() const noexcept { return {data_, size_}; }
    /// Gives the buffer back now.
    void reset() noexcept {
        if (data_) eng_->give_back(data_);
        eng_ = nullptr;
        data_ = nullptr;
        size_ = 0;
    }

private:
    engine::engine* eng_ = nullptr;
    char* data_ = nullptr;
    size_t size_ = 0;
};

/// recv_pooled's awaitable: co_await gives result<pooled_buffer>.
class [[nodiscard]] pooled_recv_awaitable : public op_awaitable {
public:
    using op_awaitable::op_awaitable;
    result<pooled_buffer> await_resume() const noexcept {
        const long r = op_awaitable::await_resume();
        if (r < 0) return errno_error(static_cast<int>(-r));
        if (r == 0) return pooled_buffer{};
        return pooled_buffer(eng(), static_cast<char*>(op().buf), static_cast<size_t>(r));
    }
};

/// A no-op round trip through the engine (io_uring: IORING_OP_NOP).
inline op_awaitable nop() noexcept { return op_awaitable(engine::io_op{}); }

namespace io_detail {
inline engine::io_op xfer(engine::opcode c, int fd, const void* buf, size_t n, int64_t off = -1,
                          int flags = 0) noexcept {
    return engine::io_op::transfer(c, fd, const_cast<void*>(buf), n, off, flags);
}
}  // namespace io_detail

/// May be short; 0 is the end of the stream.
inline io_awaitable<size_t> read_some(int fd, void* buf, size_t n,
                                      duration timeout = forever) noexcept {
    return io_awaitable<size_t>(io_detail::xfer(engine::opcode::read, fd, buf, n), timeout);
}
inline io_awaitable<size_t> write_some(int fd, const void* buf, size_t n,
                                       duration timeout = forever) noexcept {
    return io_awaitable<size_t>(io_detail::xfer(engine::opcode::write, fd, buf, n), timeout);
}
inline io_awaitable<size_t> pread(int fd, void* buf, size_t n, int64_t off,
                                  duration timeout = forever) noexcept {
    return io_awaitable<size_t>(io_detail::xfer(engine::opcode::read, fd, buf, n, off), timeout);
}
inline io_awaitable<size_t> pwrite(int fd, const void* buf, size_t n, int64_t off,
                                   duration timeout = forever) noexcept {
    return io_awaitable<size_t>(io_detail::xfer(engine::opcode::write, fd, buf, n, off), timeout);
}
inline io_awaitable<size_t> recv_some(int fd, void* buf, size_t n, int flags = 0,
                                      duration timeout = forever) noexcept {
    return io_awaitable<size_t>(io_detail::xfer(engine::opcode::recv, fd, buf, n, -1, flags),
                                timeout);
}
inline io_awaitable<size_t> send_some(int fd, const void* buf, size_t n, int flags = 0,
                                      duration timeout = forever) noexcept {
    return io_awaitable<size_t>(
        io_detail::xfer(engine::opcode::send, fd, buf, n, -1, flags | MSG_NOSIGNAL), timeout);
}
/// Receives up to engine::engine::pooled_buffer_size bytes into a buffer of the vCPU engine's
/// pool, taken only once data has arrived (io_uring: a provided-buffer ring; epoll: at
/// readiness): a task waiting on an idle connection holds no receive buffer. When every buffer
/// of the pool is out, the receive waits for one to come back. An empty buffer is the end of
/// the stream. Errors: those of recv_some.
inline pooled_recv_awaitable recv_pooled(int fd, int flags = 0, duration timeout = forever) noexcept {
    return pooled_recv_awaitable(engine::io_op::recv_pooled(fd, flags), timeout);
}
/// recv_some for a socket read ahead (gluon::fd::recv_ahead): on io_uring one multishot
/// receive stays armed on the socket and this copies from the buffers it fills. Every read of
/// fd must then be made this way (or by recv_pooled_ahead), from one vCPU, and fd closed with
/// fd::close on that vCPU. Errors: those of recv_some.
inline io_awaitable<size_t> recv_ahead(int fd, void* buf, size_t n, duration timeout = forever) noexcept {
    engine::io_op op = io_detail::xfer(engine::opcode::recv, fd, buf, n);
    op.shared_recv = true;
    return io_awaitable<size_t>(op, timeout);
}
/// recv_pooled for a socket read ahead (the contract of recv_ahead): the pool buffer the
/// multishot receive filled is handed over whole, with no copy and no receive request per
/// message. Errors: those of recv_pooled.
inline pooled_recv_awaitable recv_pooled_ahead(int fd, duration timeout = forever) noexcept {
    engine::io_op op = engine::io_op::recv_pooled(fd);
    op.shared_recv = true;
    return pooled_recv_awaitable(op, timeout);
}
/// The accepted fd (SOCK_CLOEXEC by default).
inline io_awaitable<int> accept(int fd, sockaddr* addr = nullptr, socklen_t* addrlen = nullptr,
                                int flags = SOCK_CLOEXEC, duration timeout = forever) noexcept {
    return io_awaitable<int>(engine::io_op::accept(fd, addr, addrlen, flags), timeout);
}
/// Connects fd to addr, as gluon::fd::connect: a Unix listener whose backlog is full is tried
/// again after pauses (gluon::fd::k_connect_pause_first doubling up to k_connect_pause_max)
/// until the connect gets in; the timeout bounds the whole call. Errors: those of connect(2),
/// ETIMEDOUT (a backlog still full at the timeout included), ECANCELED.
task<result<void>> connect(int fd, const sockaddr* addr, socklen_t len, duration timeout = forever);
/// The revents mask once fd has any of `events`.
inline io_awaitable<short> poll(int fd, short events, duration timeout = forever) noexcept {
    return io_awaitable<short>(engine::io_op::poll(fd, events), timeout);
}

/// Loops until all n bytes are sent; the timeout bounds the whole call (as fd::send_all), a
/// peer that takes bytes a few at a time fails it too. Errors: those of send_some (ETIMEDOUT
/// once the timeout has passed, whatever was sent), EPIPE (the peer took nothing).
task<result<void>> send_all(int fd, const void* buf, size_t n, duration timeout = forever);
/// Loops until n bytes are received; the timeout bounds the whole call (as fd::recv_exactly),
/// a peer that trickles bytes in fails it too. Errors: those of recv_some (ETIMEDOUT once the
/// timeout has passed, whatever was received), ENODATA (end of stream first).
task<result<void>> recv_exactly(int fd, void* buf, size_t n, duration timeout = forever);

/// Suspends for d (ECANCELED if the task is cancelled first).
class [[nodiscard]] sleep_awaitable : task_detail::cancel_hook {
public:
    explicit sleep_awaitable(deadline_t deadline) noexcept : deadline_(deadline) {}
    sleep_awaitable(const sleep_awaitable&) = delete;
    bool await_ready() const noexcept { return false; }
    template <typename P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
        return start(h, task_detail::ctx_of(h));
    }
    result<void> await_resume() const noexcept { return void_from_syscall(res_); }

private:
    bool start(std::coroutine_handle<> h, task_detail::task_ctx* ctx) noexcept;
    deadline_t deadline_;
    std::coroutine_handle<> h_;
    task_detail::task_ctx* ctx_ = nullptr;
    long res_ = 0;
    vcpu_timer timer_;
};

/// Errors: ECANCELED, EPERM (not on a vCPU).
inline sleep_awaitable sleep_for(duration d) noexcept { return sleep_awaitable(deadline_after(d)); }
inline sleep_awaitable sleep_until(deadline_t deadline) noexcept { return sleep_awaitable(deadline); }

/// Lets other ready tasks (and, now and then, fibers) run first. A task that only computes
/// and yields learns here that it is cancelled (its vCPU's fini cancels it too, and waits for
/// it to end): it then fails at once, without yielding.
class [[nodiscard]] yield_awaitable {
public:
    bool await_ready() const noexcept { return false; }
    template <typename P>
    bool await_suspend(std::coroutine_handle<P> h) noexcept {
        ctx_ = task_detail::ctx_of(h);
        if (ctx_ && ctx_->cancelled) return false;
        schedule(h);
        return true;
    }
    result<void> await_resume() const noexcept {
        if (ctx_ && ctx_->cancelled) return errno_error(ctx_->cancelled);
        return {};
    }

private:
    static void schedule(std::coroutine_handle<> h) noexcept;
    task_detail::task_ctx* ctx_ = nullptr;
};
/// Errors: ECANCELED (the task is cancelled).
inline yield_awaitable yield() noexcept { return {}; }

}  // namespace gluon::co
