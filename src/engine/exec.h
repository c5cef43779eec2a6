// Runs an io_op as one non-blocking syscall (the epoll engine's "try" step). Private.
#pragma once

#include "gluon/engine/engine.h"

namespace gluon::engine::detail {

/// Performs op's syscall once; -EAGAIN means "not ready yet".
long exec_now(io_op& op) noexcept;

/// Which readiness an op waits for: EPOLLIN-ish (true) or EPOLLOUT-ish (false).
bool waits_for_input(const io_op& op) noexcept;

}  // namespace gluon::engine::detail
