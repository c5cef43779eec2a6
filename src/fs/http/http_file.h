// A file of the HTTP filesystem: reads are Range requests pinned to the validator seen at open.
// Private to fs/http.
#pragma once

#include <atomic>
#include <memory>

#include "gluon/fs/file.h"
#include "http_shared.h"

namespace gluon::fs::detail {

/// The stat of a file (or, with dir set, a directory) described by m.
struct stat http_stat(const http_meta& m, uint64_t ino, bool dir = false) noexcept;

class http_file final : public file {
public:
    http_file(std::shared_ptr<http_shared> sh, http_meta m, uint64_t ino) noexcept
        : sh_(std::move(sh)), meta_(std::move(m)), ino_(ino), ranges_(meta_.ranges) {}

    result<struct stat> fstat() noexcept override;
    result<void> fsync() noexcept override { return closed_ ? errno_error(EBADF) : result<void>{}; }
    result<void> ftruncate(int64_t) noexcept override { return errno_error(EROFS); }
    result<void> fallocate(int, int64_t, int64_t) noexcept override { return errno_error(EROFS); }
    result<void> close() noexcept override;
    /// Without ETag and Last-Modified nothing tells one version of the file from another.
    bool versioned() const noexcept override { return !meta_.etag.empty() || !meta_.last_modified.empty(); }

protected:
    result<size_t> do_pread(void* buf, size_t n, int64_t off, deadline_t d) noexcept override;
    result<size_t> do_pwrite(const void*, size_t, int64_t, deadline_t) noexcept override { return errno_error(EBADF); }
    result<size_t> do_pwritev(const iovec*, int, int64_t, deadline_t) noexcept override { return errno_error(EBADF); }

private:
    /// One Range request. transient: a new attempt may succeed. Sets ranges_ false (and fails
    /// with EAGAIN) when the server answers with the whole file instead.
    result<size_t> range_once(char* buf, size_t n, uint64_t off, deadline_t d, bool& transient) noexcept;
    /// One GET of the whole file, keeping the window [off, off + n).
    result<size_t> whole_once(char* buf, size_t n, uint64_t off, deadline_t d, bool& transient) noexcept;
    /// The validator fields every read sends.
    void add_conditions(http::client_request& q) const;
    /// ESTALE if a response's ETag or Last-Modified says the file changed.
    bool changed(const http::client_response& r) const noexcept;
    result<size_t> stale() noexcept;

    std::shared_ptr<http_shared> sh_;
    const http_meta meta_;
    const uint64_t ino_;
    std::atomic<bool> ranges_;
    bool closed_ = false;
};

}  // namespace gluon::fs::detail
