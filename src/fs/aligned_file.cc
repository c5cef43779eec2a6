// aligned file: widen, bounce, merge.
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <shared_mutex>

#include "forwarding_file.h"
#include "gluon/fs/decorators.h"
#include "gluon/sync/shared_mutex.h"

namespace gluon::fs {
namespace {

struct free_deleter {
    void operator()(char* p) const noexcept { std::free(p); }
};
using bounce_ptr = std::unique_ptr<char, free_deleter>;

class aligned_file final : public detail::forwarding_file {
public:
    aligned_file(std::unique_ptr<file> inner, size_t a) : forwarding_file(std::move(inner)), a_(a) {}

    result<size_t> do_pread(void* buf, size_t n, int64_t off, deadline_t d) noexcept override {
        if (off < 0) return errno_error(EINVAL);
        if (aligned(buf, n, off) || n == 0) return in_->pread(buf, n, off, time_left(d));
        const uint64_t a0 = down(off), a1 = up(static_cast<uint64_t>(off) + n);
        auto b = bounce(a1 - a0);
        if (!b) return errno_error(ENOMEM);
        auto r = in_->pread(b.get(), a1 - a0, static_cast<int64_t>(a0), time_left(d));
        if (!r) return r;
        const uint64_t skip = static_cast<uint64_t>(off) - a0;
        if (*r <= skip) return size_t{0};  // at or past end of file
        const size_t got = std::min<size_t>(n, *r - skip);
        std::memcpy(buf, b.get() + skip, got);
        return got;
    }

    result<size_t> do_pwrite(const void* buf, size_t n, int64_t off, deadline_t d) noexcept override {
        if (off < 0) return errno_error(EINVAL);
        // The wait for a merge in progress (or for the lock of our own) is part of the call: it
        // ends at the call's deadline, or when the fiber is interrupted.
        if (aligned(buf, n, off) || n == 0) {
            GLUON_TRY(mu_.lock_shared_until(d));
            std::shared_lock lk(mu_, std::adopt_lock);
            return in_->pwrite(buf, n, off, time_left(d));
        }
        GLUON_TRY(mu_.lock_until(d));
        std::lock_guard lk(mu_, std::adopt_lock);
        const uint64_t end = static_cast<uint64_t>(off) + n;
        const uint64_t a0 = down(off), a1 = up(end);
        // The file's size matters only when the last block is partial: writing it whole may
        // lengthen the file, which the truncate below undoes.
        uint64_t size = end;
        if (end != a1) {
            auto st = GLUON_TRY(in_->fstat());
            size = static_cast<uint64_t>(st.st_size);
        }
        auto b = bounce(a1 - a0);
        if (!b) return errno_error(ENOMEM);
        std::memset(b.get(), 0, a1 - a0);
        // Edge blocks that the write covers only partly keep their other bytes.
        if (static_cast<uint64_t>(off) != a0)
            GLUON_TRY(fill(b.get(), a0, d));
        if (end != a1 && (a1 - a_ != a0 || static_cast<uint64_t>(off) == a0))
            GLUON_TRY(fill(b.get() + (a1 - a_ - a0), a1 - a_, d));
        std::memcpy(b.get() + (static_cast<uint64_t>(off) - a0), buf, n);
        GLUON_TRY(in_->pwrite_all(b.get(), a1 - a0, static_cast<int64_t>(a0), time_left(d)));
        const uint64_t new_size = std::max(size, end);
        if (a1 > new_size)
            GLUON_TRY(in_->ftruncate(static_cast<int64_t>(new_size)));
        return n;
    }

    // Vectored calls go element by element through the aligning pread/pwrite above.
    result<size_t> do_preadv(const iovec* iov, int cnt, int64_t off, deadline_t d) noexcept override {
        return file::do_preadv(iov, cnt, off, d);
    }
    result<size_t> do_pwritev(const iovec* iov, int cnt, int64_t off, deadline_t d) noexcept override {
        return file::do_pwritev(iov, cnt, off, d);
    }
    // Size changes wait for a read-modify-write too: its closing truncate would undo them.
    result<void> ftruncate(int64_t len) noexcept override {
        std::shared_lock lk(mu_);
        return in_->ftruncate(len);
    }
    result<void> fallocate(int mode, int64_t off, int64_t len) noexcept override {
        std::shared_lock lk(mu_);
        return in_->fallocate(mode, off, len);
    }

private:
    bool aligned(const void* buf, size_t n, int64_t off) const noexcept {
        return (reinterpret_cast<uintptr_t>(buf) | n | static_cast<uint64_t>(off)) % a_ == 0;
    }
    uint64_t down(int64_t v) const noexcept { return static_cast<uint64_t>(v) / a_ * a_; }
    uint64_t up(uint64_t v) const noexcept { return (v + a_ - 1) / a_ * a_; }
    bounce_ptr bounce(size_t n) const noexcept {
        void* p = nullptr;
        if (posix_memalign(&p, a_, n) != 0) return nullptr;
        return bounce_ptr(static_cast<char*>(p));
    }
    // Reads the block at `at` into dst; past the end of file it stays zero.
    result<void> fill(char* dst, uint64_t at, deadline_t d) noexcept {
        GLUON_TRY(in_->pread(dst, a_, static_cast<int64_t>(at), time_left(d)));
        return {};
    }

    size_t a_;
    // Held alone by a read-modify-write, shared by the calls that write or resize without one:
    // such a call landing between the RMW's read and its write-back (or its truncate to the
    // length it saw) would be lost.
    shared_mutex mu_;
};

}  // namespace

result<std::unique_ptr<file>> make_aligned(std::unique_ptr<file> inner, size_t alignment) {
    if (!inner || alignment < 512 || (alignment & (alignment - 1))) return errno_error(EINVAL);
    return std::unique_ptr<file>(new aligned_file(std::move(inner), alignment));
}

}  // namespace gluon::fs
