// psync: blocking syscalls, either handed to the offload pool (the vCPU keeps running other
// fibers) or run inline on the vCPU (no hand-off; a page-cache miss stalls the vCPU).
#include "gluon/common/lazy.h"
#include "gluon/runtime/runtime.h"
#include "engines.h"

namespace gluon::file_io::detail {

long offload_execute(engine::io_op& op) noexcept {
    return offload_call([&] { return engine::execute_blocking(op); });  // inline off a vCPU
}

namespace {

class psync final : public file_engine {
public:
    engine_kind kind() const noexcept override { return engine_kind::psync; }
    long execute(engine::io_op& op, deadline_t) noexcept override { return offload_execute(op); }
};

class psync_inline final : public file_engine {
public:
    engine_kind kind() const noexcept override { return engine_kind::psync_inline; }
    long execute(engine::io_op& op, deadline_t) noexcept override {
        return engine::execute_blocking(op);
    }
};

}  // namespace

static constinit immortal<psync> g_psync_engine;  // no local static (lazy.h)

file_engine& psync_engine() noexcept { return g_psync_engine.value; }

static constinit immortal<psync_inline> g_psync_inline_engine;  // no local static (lazy.h)

file_engine& psync_inline_engine() noexcept { return g_psync_inline_engine.value; }

}  // namespace gluon::file_io::detail
