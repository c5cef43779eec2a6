// A file that forwards every call to an inner file: the base of the decorators, which override
// only what they change. Private to the fs module.
#pragma once

#include <memory>

#include "gluon/fs/file.h"

namespace gluon::fs::detail {

class forwarding_file : public file {
public:
    explicit forwarding_file(std::unique_ptr<file> inner) noexcept : in_(std::move(inner)) {}

    result<size_t> do_pread(void* buf, size_t n, int64_t off, deadline_t d) noexcept override { return in_->pread(buf, n, off, time_left(d)); }
    result<size_t> do_pwrite(const void* buf, size_t n, int64_t off, deadline_t d) noexcept override {
        return in_->pwrite(buf, n, off, time_left(d));
    }
    result<size_t> do_preadv(const iovec* iov, int cnt, int64_t off, deadline_t d) noexcept override {
        return in_->preadv(iov, cnt, off, time_left(d));
    }
    result<size_t> do_pwritev(const iovec* iov, int cnt, int64_t off, deadline_t d) noexcept override {
        return in_->pwritev(iov, cnt, off, time_left(d));
    }
    result<struct stat> fstat() noexcept override { return in_->fstat(); }
    result<void> fsync() noexcept override { return in_->fsync(); }
    result<void> fdatasync() noexcept override { return in_->fdatasync(); }
    result<void> ftruncate(int64_t len) noexcept override { return in_->ftruncate(len); }
    result<void> fallocate(int mode, int64_t off, int64_t len) noexcept override {
        return in_->fallocate(mode, off, len);
    }
    result<void> close() noexcept override { return in_->close(); }
    int native_handle() const noexcept override { return in_->native_handle(); }
    bool versioned() const noexcept override { return in_->versioned(); }

protected:
    std::unique_ptr<file> in_;
};

}  // namespace gluon::fs::detail
