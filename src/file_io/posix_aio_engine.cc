// POSIX AIO file engine: glibc's aio_read/aio_write/aio_fsync (served by glibc's own thread
// pool), with completion delivered by SIGEV_THREAD to the waiting fiber. Vectored, current-
// position and metadata operations go to the offload pool (POSIX AIO has none of them).
#include <aio.h>
#include <fcntl.h>

#include "gluon/common/lazy.h"
#include "gluon/runtime/oneshot.h"
#include "gluon/runtime/vcpu.h"
#include "engines.h"

namespace gluon::file_io::detail {
namespace {

struct request {
    aiocb cb{};
    oneshot done;
};

void on_done(sigval v) { static_cast<request*>(v.sival_ptr)->done.signal(); }

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
        request rq;
        if (start(rq, op) != 0) return offload_execute(op);  // EAGAIN: out of resources
        long w = rq.done.wait_until(d);
        if (w < 0) {
            (void)aio_cancel(op.fd, &rq.cb);
            rq.done.wait();  // the notification still comes, cancelled or not
        }
        int err = aio_error(&rq.cb);
        long r = aio_return(&rq.cb);
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
