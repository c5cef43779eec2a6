// A file, shaped like the POSIX calls on an fd, returning result<T>. Implemented by the local
// filesystem and wrapped by decorators (aligned, throttled, linear/striped composition).
// All calls park only the calling fiber. Reads are short only at end of file (0 = EOF), or
// past the 0x7ffff000 bytes one read(2) moves at most; writes may be short (e.g. a partial
// write before ENOSPC): nothing is retried behind the caller's back except by the *_all /
// *_exactly helpers, which say so.
//
// Reads and writes take a timeout for the whole call (ETIMEDOUT) and end with ECANCELED when the
// fiber is interrupted. The local filesystem honours both on the io_uring engine (the operation
// is cancelled in flight; a completed one returns its result). On the libaio engine an operation
// the kernel has taken runs to its end first (Linux AIO cannot cancel file reads and writes), as
// one already handed to a thread does on the psync and POSIX AIO engines; the call then returns
// its result.
// Implementations override the protected do_* calls, which get the call's deadline.
#pragma once

#include <sys/stat.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"

namespace gluon::fs {

class file {
public:
    virtual ~file() = default;

    /// Errors: EBADF (closed), EINVAL (bad offset; O_DIRECT misalignment), EISDIR, EIO,
    /// ETIMEDOUT, ECANCELED, ...
    result<size_t> pread(void* buf, size_t n, int64_t off, duration timeout = forever) noexcept {
        return do_pread(buf, n, off, deadline_after(timeout));
    }
    /// Errors: as pread, plus ENOSPC, EFBIG, EDQUOT.
    result<size_t> pwrite(const void* buf, size_t n, int64_t off, duration timeout = forever) noexcept {
        return do_pwrite(buf, n, off, deadline_after(timeout));
    }
    /// Vectored forms (not atomic with respect to other writers unless the file says so).
    result<size_t> preadv(const iovec* iov, int cnt, int64_t off, duration timeout = forever) noexcept {
        return do_preadv(iov, cnt, off, deadline_after(timeout));
    }
    result<size_t> pwritev(const iovec* iov, int cnt, int64_t off, duration timeout = forever) noexcept {
        return do_pwritev(iov, cnt, off, deadline_after(timeout));
    }
    virtual result<struct stat> fstat() noexcept = 0;
    virtual result<void> fsync() noexcept = 0;
    virtual result<void> fdatasync() noexcept { return fsync(); }
    /// Errors: EINVAL (negative length), EFBIG, EROFS, ...
    virtual result<void> ftruncate(int64_t len) noexcept = 0;
    /// Errors: EOPNOTSUPP where the file (or its filesystem) cannot preallocate, ENOSPC.
    virtual result<void> fallocate(int mode, int64_t off, int64_t len) noexcept;
    /// Releases the file; later calls fail with EBADF. Also done by the destructor.
    virtual result<void> close() noexcept = 0;
    /// The underlying fd, or -1 for composed files.
    virtual int native_handle() const noexcept { return -1; }
    /// Whether a change of the file's bytes shows in its stat (size, mtime or inode number), as a
    /// local file's mtime does: what caches key their copies on. False for an HTTP file whose
    /// server sent neither ETag nor Last-Modified (its stat is the same for every version).
    virtual bool versioned() const noexcept { return true; }

    // Position-based calls on top of the positioned ones (the position is the object's, not
    // the kernel's: two file objects on one path have separate positions).
    result<size_t> read(void* buf, size_t n, duration timeout = forever) noexcept;
    result<size_t> write(const void* buf, size_t n, duration timeout = forever) noexcept;
    /// SEEK_SET, SEEK_CUR, SEEK_END. The position is unchanged on error. Errors: EINVAL
    /// (negative result, bad whence), EOVERFLOW (a result past INT64_MAX), those of fstat
    /// (SEEK_END).
    result<int64_t> lseek(int64_t off, int whence) noexcept;

    /// Loops until n bytes are written. Errors: those of pwrite (ENOSPC after a partial write:
    /// what was written stays written).
    result<void> pwrite_all(const void* buf, size_t n, int64_t off, duration timeout = forever) noexcept;
    /// Loops until n bytes are read. Errors: those of pread, and ENODATA if the file ends first.
    result<void> pread_exactly(void* buf, size_t n, int64_t off, duration timeout = forever) noexcept;

protected:
    virtual result<size_t> do_pread(void* buf, size_t n, int64_t off, deadline_t d) noexcept = 0;
    virtual result<size_t> do_pwrite(const void* buf, size_t n, int64_t off, deadline_t d) noexcept = 0;
    /// Defaults: do_pread/do_pwrite per element, stopping at the first short transfer.
    virtual result<size_t> do_preadv(const iovec* iov, int cnt, int64_t off, deadline_t d) noexcept;
    virtual result<size_t> do_pwritev(const iovec* iov, int cnt, int64_t off, deadline_t d) noexcept;

    int64_t pos_ = 0;
};

}  // namespace gluon::fs
