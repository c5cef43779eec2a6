// POSIX AIO file engine: glibc's aio_read/aio_write/aio_fsync (served by glibc's own thread
// pool), with completion delivered by SIGEV_THREAD to the waiting fiber. Vectored, current-
// position and metadata operations go to the offload pool (POSIX AIO has none of them).
//
// glibc delivers each notification by starting a thread. When it cannot (RLIMIT_NPROC, a
// cgroup's pids.max, no memory for a stack) the notification is lost without a word (2.36 does
// not even record the failure: aio_error gives the I/O's result). So the wait also looks at
// aio_error every k_check_ns: once glibc is done with a request (its result set and the
// notification tried, under the lock aio_error takes) it is no longer EINPROGRESS.
#include <aio.h>
#include <fcntl.h>

#include <atomic>
#include <cerrno>
#include <new>

#include "gluon/common/lazy.h"
#include "gluon/runtime/oneshot.h"
#include "gluon/runtime/vcpu.h"
#include "engines.h"

namespace gluon::file_io::detail {
namespace {

constexpr int64_t k_check_ns = 10'000'000;  // 10 ms: what a lost notification costs

// On the heap, shared by the waiting fiber and on_done: the notification may run after the fiber
// found the request done by aio_error and returned, or never. The last to let go frees it (one
// whose notification never comes is leaked, as glibc leaks its own record of it).
struct request {
    aiocb cb{};
    oneshot done;
    std::atomic<int> refs{2};  // the fiber's and on_done's

    void release() noexcept {
        if (refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
    }
};

void on_done(sigval v) {
    auto* rq = static_cast<request*>(v.sival_ptr);
    rq->done.signal();
    rq->release();
}

// Waits until on_done runs or aio_error shows the request done (0), or until the deadline or an
// interrupt (-ETIMEDOUT / -ECANCELED) while it is still in progress. A request found done after
// an interrupt ended the wait is done: its result wins and the interrupt stays pending (fiber.h).
long wait_done(request& rq, deadline_t d, bool interruptible) noexcept {
    for (;;) {
        const int64_t now = mono_now_ns();
        const deadline_t slice = d - now > k_check_ns ? now + k_check_ns : d;
        const long w = rq.done.wait_until(slice, interruptible);
        if (w == 0) return 0;
        if (aio_error(&rq.cb) != EINPROGRESS) {
            if (w == -ECANCELED) restore_interrupt();
            return 0;
        }
        if (w != -ETIMEDOUT || slice == d) return w;
    }
}

int start(request& rq, engine::io_op& op) {
    rq.cb.aio_fildes = op.fd;
    rq.cb.aio_buf = op.buf;
    rq.cb.aio_nbytes = op.len;
    rq.cb.aio_offset = op.offset;
    rq.cb.aio_sigevent.sigev_notify = SIGEV_THREAD;
    rq.cb.aio_sigevent.sigev_notify_function = on_done;
    rq.cb.aio_sigevent.sigev_value.sival_ptr = &rq;
    switch (op.code) {
        case engine::opcode::read:
        case engine::opcode::read_fixed: return aio_read(&rq.cb);
        case engine::opcode::write:
        case engine::opcode::write_fixed: return aio_write(&rq.cb);
        case engine::opcode::fsync: return aio_fsync((op.flags & 1) ? O_DSYNC : O_SYNC, &rq.cb);
        default: return 1;
    }
}

bool supported(const engine::io_op& op) {
    if (op.fixed_file) return false;
    if (op.code == engine::opcode::fsync) return true;
    return op.offset >= 0 && (op.code == engine::opcode::read || op.code == engine::opcode::write ||
                              op.code == engine::opcode::read_fixed || op.code == engine::opcode::write_fixed);
}

class posix_aio final : public file_engine {
public:
    engine_kind kind() const noexcept override { return engine_kind::posix_aio; }
    long execute(engine::io_op& op, deadline_t d) noexcept override {
        if (!is_vcpu()) return engine::execute_blocking(op);
        if (!supported(op)) return offload_execute(op);
        auto* rq = new (std::nothrow) request;
        if (rq == nullptr) return offload_execute(op);
        if (start(*rq, op) != 0) {  // EAGAIN: out of resources, and no notification to come
            delete rq;
            return offload_execute(op);
        }
        long w = wait_done(*rq, d, true);
        if (w < 0) {
            (void)aio_cancel(op.fd, &rq->cb);
            (void)wait_done(*rq, k_no_deadline, false);  // it ends, cancelled or not
        }
        int err = aio_error(&rq->cb);
        long r = aio_return(&rq->cb);
        rq->release();
        if (err == ECANCELED && w < 0) return w;
        // It completed first: its result wins, and the interrupt the wait consumed stays
        // pending for the next blocking call (fiber.h).
        if (w == -ECANCELED) restore_interrupt();
        return err != 0 ? -err : r;
    }
};

}  // namespace

static constinit immortal<posix_aio> g_posix_aio_engine;  // no local static (lazy.h)

file_engine& posix_aio_engine() noexcept { return g_posix_aio_engine.value; }

}  // namespace gluon::file_io::detail
