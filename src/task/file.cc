#include "gluon/task/file.h"

#include "gluon/runtime/vcpu.h"
#include "gluon/task/io.h"
#include "gluon/task/sync.h"

namespace gluon::co {

namespace {
// The vCPU's own engine carries the file engine's operations natively (no side ring, no
// thread hand-off).
bool native_here(const file_io::file_engine& e) noexcept {
    engine::engine* eng = current_engine();
    return e.kind() == file_io::engine_kind::io_uring && eng && eng->type() == engine::kind::io_uring;
}
}  // namespace

task<result<size_t>> pread(file_io::file_engine& e, int fd, void* buf, size_t n, int64_t off, duration timeout) {
    if (native_here(e))
        co_return co_await io_awaitable<size_t>(engine::io_op::transfer(engine::opcode::read, fd, buf, n, off), timeout);
    co_return co_await in_fiber([&] { return file_io::pread(e, fd, buf, n, off, timeout); });
}

task<result<size_t>> pwrite(file_io::file_engine& e, int fd, const void* buf, size_t n, int64_t off,
                            duration timeout) {
    if (native_here(e))
        co_return co_await io_awaitable<size_t>(
            engine::io_op::transfer(engine::opcode::write, fd, const_cast<void*>(buf), n, off), timeout);
    co_return co_await in_fiber([&] { return file_io::pwrite(e, fd, buf, n, off, timeout); });
}

task<result<void>> fsync(file_io::file_engine& e, int fd, bool datasync) {
    if (native_here(e)) co_return co_await io_awaitable<void>(engine::io_op::fsync(fd, datasync));
    co_return co_await in_fiber([&] { return file_io::fsync(e, fd, datasync); });
}

}  // namespace gluon::co
