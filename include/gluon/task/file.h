// File I/O for tasks on gluon's file engines (gluon/file_io/file_engine.h). Where the operation
// is native to the vCPU's own engine (the io_uring file engine on an io_uring vCPU) the task
// awaits the engine directly; otherwise the file engine's call runs in a helper fiber
// (co::in_fiber) while the task is suspended. Timeouts and cancellation as in gluon/task/io.h.
#pragma once

#include "gluon/file_io/file_engine.h"
#include "gluon/task/task.h"

namespace gluon::co {

/// May be short at the end of the file (0 = EOF). Errors: those of file_io::pread.
task<result<size_t>> pread(file_io::file_engine& e, int fd, void* buf, size_t n, int64_t off,
                           duration timeout = forever);
/// May be short. Errors: those of file_io::pwrite.
task<result<size_t>> pwrite(file_io::file_engine& e, int fd, const void* buf, size_t n, int64_t off,
                            duration timeout = forever);
/// Errors: those of file_io::fsync.
task<result<void>> fsync(file_io::file_engine& e, int fd, bool datasync = false);

}  // namespace gluon::co
