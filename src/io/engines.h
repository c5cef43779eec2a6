// The file engines behind gluon::io::get(). Private to the io module.
#pragma once

#include "gluon/io/file_engine.h"

namespace gluon::io::detail {

file_engine& uring_engine() noexcept;
file_engine& psync_engine() noexcept;
file_engine& psync_inline_engine() noexcept;
file_engine& libaio_engine() noexcept;
file_engine& posix_aio_engine() noexcept;

bool libaio_available() noexcept;

/// Runs op as a blocking syscall on the offload pool (inline outside a vCPU).
long offload_execute(engine::io_op& op) noexcept;

}  // namespace gluon::io::detail
