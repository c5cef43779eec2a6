// io_uring file engine. On a vCPU whose event engine is io_uring, file ops go on the same ring
// as everything else (batched with the network, one io_uring_enter per scheduler pass). On an
// epoll vCPU they go on a second, per-thread ring without DEFER_TASKRUN (so the kernel posts
// completions by itself), whose fd the epoll loop watches through a driver fiber that runs only
// while operations are in flight.
#include <poll.h>

#include <memory>

#include "engines.h"
#include "gluon/common/log.h"
#include "gluon/runtime/fd.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu.h"

namespace gluon::io::detail {
namespace {

struct side_ring {
    std::unique_ptr<engine::engine> eng;
    unsigned inflight = 0;
    bool driving = false;
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
    ++s.inflight;
    if (!s.driving) {
        auto f = spawn(fiber_options{.name = "io_uring-files"}, drive, &s);
        if (!f) {
            --s.inflight;
            return engine::execute_blocking(op);
        }
        s.driving = true;
        (void)f->detach();
    }
    long r = run_op(*s.eng, op, d);
    --s.inflight;
    return r;
}

class uring final : public file_engine {
public:
    engine_kind kind() const noexcept override { return engine_kind::io_uring; }
    long execute(engine::io_op& op, deadline_t d) noexcept override {
        engine::engine* eng = current_engine();
        if (!eng) return engine::execute_blocking(op);
        if (eng->type() == engine::kind::io_uring) return run_op(op, d);
        return run_on_side(op, d);
    }
};

}  // namespace

file_engine& uring_engine() noexcept {
    static uring e;
    return e;
}

}  // namespace gluon::io::detail
