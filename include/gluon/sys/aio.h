// The syscall floor for Linux AIO (io_setup and friends), without libaio, whose wrappers go
// through libc's syscall(). The result or -errno, through sys/raw.h (ADR 0013).
// Errors: whatever the kernel returns, as -errno.
#pragma once

#include <linux/aio_abi.h>
#include <time.h>
#include <unistd.h>

#include "gluon/sys/raw.h"

namespace gluon::sys {

inline long aio_setup(unsigned depth, aio_context_t* ctx) noexcept {
    return GLUON_SYSCALL(::syscall(SYS_io_setup, depth, ctx), SYS_io_setup, depth, ctx);
}
inline long aio_destroy(aio_context_t ctx) noexcept {
    return GLUON_SYSCALL(::syscall(SYS_io_destroy, ctx), SYS_io_destroy, ctx);
}
inline long aio_submit(aio_context_t ctx, long n, iocb** cbs) noexcept {
    return GLUON_SYSCALL(::syscall(SYS_io_submit, ctx, n, cbs), SYS_io_submit, ctx, n, cbs);
}
inline long aio_cancel(aio_context_t ctx, iocb* cb, io_event* out) noexcept {
    return GLUON_SYSCALL(::syscall(SYS_io_cancel, ctx, cb, out), SYS_io_cancel, ctx, cb, out);
}
/// Reaps between min_nr and nr completions, waiting up to *timeout (nullptr: forever).
inline long aio_getevents(aio_context_t ctx, long min_nr, long nr, io_event* evs, timespec* timeout) noexcept {
    return GLUON_SYSCALL(::syscall(SYS_io_getevents, ctx, min_nr, nr, evs, timeout), SYS_io_getevents, ctx,
                         min_nr, nr, evs, timeout);
}

}  // namespace gluon::sys
