// libaio file engine: positioned reads and writes through Linux AIO, completions
// signalled on an eventfd that the vCPU's event engine watches. One AIO context per vCPU
// thread, reaped by a driver fiber that runs only while operations are in flight. Linux AIO is
// asynchronous only for O_DIRECT; on buffered files io_submit itself does the I/O. Everything
// else (metadata, current-position I/O) goes to the offload pool. The system calls are made
// directly (sys/aio.h), not through libaio, whose wrappers enter the kernel through libc.
#include <sys/eventfd.h>

#include "gluon/common/lazy.h"
#include "gluon/runtime/fd.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/oneshot.h"
#include "gluon/runtime/vcpu.h"
#include "gluon/sys/aio.h"
#include "gluon/sys/ops.h"
#include "engines.h"

namespace gluon::file_io::detail {
namespace {

constexpr int k_aio_depth = 512;

struct request {
    iocb cb{};
    oneshot done;
    long res = 0;
};

struct aio_context {
    aio_context_t ctx = 0;
    int evfd = -1;
    unsigned inflight = 0;
    bool driving = false;
    bool failed = false;

    ~aio_context() {
        if (ctx) (void)sys::aio_destroy(ctx);
        if (evfd >= 0) (void)sys::close(evfd);
    }
    bool ready() {
        if (ctx || failed) return !failed;
        evfd = static_cast<int>(sys::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
        if (evfd < 0 || sys::aio_setup(k_aio_depth, &ctx) < 0) {
            ctx = 0;
            failed = true;
        }
        return !failed;
    }
};

thread_local aio_context t_aio;

void reap(aio_context* a) {
    io_event evs[64];
    timespec zero{};
    for (;;) {
        long n = sys::aio_getevents(a->ctx, 0, 64, evs, &zero);
        if (n <= 0) return;
        for (long i = 0; i < n; ++i) {
            auto* rq = reinterpret_cast<request*>(static_cast<uintptr_t>(evs[i].data));
            rq->res = static_cast<long>(evs[i].res);
            --a->inflight;
            rq->done.signal();
        }
        if (n < 64) return;
    }
}

// Runs until nothing is in flight; interrupts (from gluon::fini) do not stop it early.
void drive(aio_context* a) {
    while (a->inflight > 0) {
        uint64_t cnt;
        (void)fd::read_some(a->evfd, &cnt, sizeof cnt);
        reap(a);
    }
    a->driving = false;
}

// Fills rq.cb for op: false if Linux AIO cannot do it.
bool prep(request& rq, engine::io_op& op) {
    if (op.offset < 0 || op.fixed_file) return false;
    switch (op.code) {
        case engine::opcode::read:
        case engine::opcode::read_fixed: rq.cb.aio_lio_opcode = IOCB_CMD_PREAD; break;
        case engine::opcode::write:
        case engine::opcode::write_fixed: rq.cb.aio_lio_opcode = IOCB_CMD_PWRITE; break;
        case engine::opcode::readv: rq.cb.aio_lio_opcode = IOCB_CMD_PREADV; break;
        case engine::opcode::writev: rq.cb.aio_lio_opcode = IOCB_CMD_PWRITEV; break;
        default: return false;
    }
    rq.cb.aio_fildes = static_cast<uint32_t>(op.fd);
    rq.cb.aio_buf = reinterpret_cast<uintptr_t>(op.buf);
    rq.cb.aio_nbytes = op.len;  // the iovec count for the vectored forms
    rq.cb.aio_offset = op.offset;
    rq.cb.aio_data = reinterpret_cast<uintptr_t>(&rq);
    return true;
}

class libaio final : public file_engine {
public:
    engine_kind kind() const noexcept override { return engine_kind::libaio; }
    long execute(engine::io_op& op, deadline_t d) noexcept override {
        if (!is_vcpu()) return engine::execute_blocking(op);
        request rq;
        if (!prep(rq, op) || !t_aio.ready()) return offload_execute(op);
        aio_context& a = t_aio;
        rq.cb.aio_flags = IOCB_FLAG_RESFD;
        rq.cb.aio_resfd = static_cast<uint32_t>(a.evfd);
        iocb* cbs[1] = {&rq.cb};
        long r = sys::aio_submit(a.ctx, 1, cbs);
        // EAGAIN: the context is full, do not fail the caller. EINVAL: AIO refuses this file
        // (a directory, a filesystem without AIO): the syscall gives the honest error.
        if (r == -EAGAIN || r == -EINVAL) return offload_execute(op);
        if (r < 0) return r;
        ++a.inflight;
        if (!a.driving) {
            a.driving = true;
            auto f = spawn(fiber_options{.name = "libaio"}, drive, &a);
            if (f)
                (void)f->detach();
            else
                drive(&a);  // no memory for a fiber: reap from here
        }
        long w = rq.done.wait_until(d);
        if (w < 0) {
            // Timed out or interrupted. Linux AIO cancels only requests whose file provides a
            // cancel (a USB gadget endpoint's): a read or write of any other file gets EINVAL,
            // and the fiber waits until the device is done. A cancel that works has returned
            // -EINPROGRESS since Linux 3.11, its event coming through the ring like any other,
            // so the fiber waits for that too; only older kernels returned 0, having handed the
            // event back in `ev` and posting none to the ring or the eventfd: the request is
            // then no longer the kernel's.
            io_event ev;
            bool cancelled = sys::aio_cancel(a.ctx, &rq.cb, &ev) == 0;
            if (cancelled) {
                --a.inflight;
                return w;
            }
            rq.done.wait();
            if (rq.res == -EINTR || rq.res == -ECANCELED) return w;
            // It completed first: its result wins, and the interrupt the wait consumed stays
            // pending for the next blocking call (fiber.h).
            if (w == -ECANCELED) restore_interrupt();
        }
        return rq.res;
    }
};

}  // namespace

bool libaio_available() noexcept {
    static constinit lazy_flag works;
    return works.get([] {
        aio_context_t ctx = 0;
        if (sys::aio_setup(1, &ctx) < 0) return false;
        (void)sys::aio_destroy(ctx);
        return true;
    });
}

static constinit immortal<libaio> g_libaio_engine;  // no local static (lazy.h)

file_engine& libaio_engine() noexcept { return g_libaio_engine.value; }

}  // namespace gluon::file_io::detail
