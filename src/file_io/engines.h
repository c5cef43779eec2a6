// The file engines behind gluon::file_io::get(). Private to the file_io module.
#pragma once

#include "gluon/file_io/file_engine.h"

namespace gluon::file_io::detail {

file_engine& uring_engine() noexcept;
file_engine& psync_engine() noexcept;
file_engine& psync_inline_engine() noexcept;
file_engine& libaio_engine() noexcept;
file_engine& posix_aio_engine() noexcept;

bool libaio_available() noexcept;

/// Runs op as a blocking syscall on the offload pool (inline outside a vCPU).
long offload_execute(engine::io_op& op) noexcept;

}  // namespace gluon::file_io::detail
