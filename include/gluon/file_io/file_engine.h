// File I/O engines: how a fiber's file operation is carried out while its vCPU keeps running
// other fibers. Pick one per file or per filesystem, or let gluon pick (automatic).
//
//   io_uring      every operation native and asynchronous on the vCPU's ring (on a vCPU whose
//                 event engine is epoll, on a second ring that the epoll loop polls).
//   libaio        Linux AIO for positioned reads and writes; asynchronous only with
//                 O_DIRECT (on buffered files io_submit itself blocks, like the kernel does).
//                 They cannot be cancelled once submitted: a timeout or an interrupt waits
//                 for the device. Other operations go to the offload pool.
//   posix_aio     glibc's POSIX AIO (a thread pool inside libc) for positioned reads, writes
//                 and fsync; others go to the offload pool. glibc starts a thread to report
//                 each completion; one it cannot report (a thread limit) is found within 10 ms.
//   psync         blocking syscalls on the offload thread pool: the vCPU never blocks, each
//                 operation pays two thread hand-offs.
//   psync_inline  blocking syscalls on the vCPU itself: the fastest for page-cache hits, but a
//                 miss stalls every fiber on the vCPU for the length of the disk access.
//
// Outside a vCPU every engine runs the operation as a blocking syscall on the calling thread.
#pragma once

#include <sys/stat.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/engine/engine.h"

namespace gluon::file_io {

enum class engine_kind : uint8_t { automatic, io_uring, libaio, posix_aio, psync, psync_inline };

const char* kind_name(engine_kind k) noexcept;
/// Parses a kind_name(); also accepts "auto", "sync" (psync_inline) and "aio" (libaio);
/// nullopt for anything else.
std::optional<engine_kind> parse_kind(std::string_view s) noexcept;
/// True if engines of kind k work on this machine (probed once).
bool available(engine_kind k) noexcept;

class file_engine {
public:
    virtual ~file_engine() = default;
    virtual engine_kind kind() const noexcept = 0;
    const char* name() const noexcept { return kind_name(kind()); }
    /// Carries out op (any file or metadata opcode of gluon::engine) and parks only the calling
    /// fiber until it completes. Returns the result (>= 0) or -errno. A deadline or an
    /// interrupt ends the wait with -ETIMEDOUT / -ECANCELED once the operation has been
    /// cancelled, or with its real result if it had already completed (an interrupt then stays
    /// pending for the fiber's next blocking call, as gluon/runtime/fiber.h says): the caller's
    /// buffer is never written after this returns. Operations on the offload pool, and libaio's
    /// reads and writes (io_cancel refuses them), cannot be cancelled: the wait lasts until they
    /// complete, and returns their result.
    virtual long execute(engine::io_op& op, deadline_t deadline = k_no_deadline) noexcept = 0;
};

/// The process-wide engine of kind k (automatic: io_uring if available, else psync).
/// Errors: EOPNOTSUPP (not available here: see available()).
result<file_engine*> get(engine_kind k = engine_kind::automatic) noexcept;

// Typed operations on plain fds through an engine. Errors are those of the syscall of the same
// name (ENOENT, EACCES, ENOSPC, EISDIR, EBADF, EINVAL, EIO, ...) plus ETIMEDOUT (the timeout,
// honoured as execute() says) / ECANCELED.
// Reads may be short at end of file (0 = EOF); writes may be short (ENOSPC after a partial
// write shows up as a short count, the next write fails). One call moves at most 0x7ffff000
// bytes (as read(2) and write(2) do, on every engine): a longer one comes back short.
// An offset of -1 means the fd's current position (the call moves it, as read(2) and write(2)
// do: for pipes and other unseekable fds); one below -1 is EINVAL.
result<size_t> pread(file_engine& e, int fd, void* buf, size_t n, int64_t off,
                     duration timeout = forever) noexcept;
result<size_t> pwrite(file_engine& e, int fd, const void* buf, size_t n, int64_t off,
                      duration timeout = forever) noexcept;
result<size_t> preadv(file_engine& e, int fd, const iovec* iov, int cnt, int64_t off,
                      duration timeout = forever) noexcept;
result<size_t> pwritev(file_engine& e, int fd, const iovec* iov, int cnt, int64_t off,
                       duration timeout = forever) noexcept;
result<void> fsync(file_engine& e, int fd, bool datasync = false) noexcept;
result<void> fallocate(file_engine& e, int fd, int mode, int64_t off, int64_t len) noexcept;
result<void> ftruncate(file_engine& e, int fd, int64_t len) noexcept;
/// Returns the new fd (add O_CLOEXEC yourself if wanted).
result<int> openat(file_engine& e, int dir, const char* path, int flags, mode_t mode = 0644) noexcept;
result<void> close(file_engine& e, int fd) noexcept;
result<struct statx> statx(file_engine& e, int dir, const char* path, int flags,
                           unsigned mask = STATX_BASIC_STATS) noexcept;
result<void> unlinkat(file_engine& e, int dir, const char* path, int flags = 0) noexcept;
result<void> renameat(file_engine& e, int old_dir, const char* old_path, int new_dir,
                      const char* new_path, unsigned flags = 0) noexcept;
result<void> mkdirat(file_engine& e, int dir, const char* path, mode_t mode = 0755) noexcept;

}  // namespace gluon::file_io
