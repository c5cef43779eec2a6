#include "gluon/fs/file.h"

#include <cerrno>
#include <cstdio>

namespace gluon::fs {

namespace {

// One positioned transfer per element; stops at the first short one. An error after some bytes
// moved reports the bytes (as the kernel does for a vectored call).
template <typename F>
result<size_t> per_element(const iovec* iov, int cnt, int64_t off, F&& one) {
    size_t total = 0;
    for (int i = 0; i < cnt; ++i) {
        auto r = one(iov[i], off + static_cast<int64_t>(total));
        if (!r) return total ? result<size_t>(total) : r;
        total += *r;
        if (*r < iov[i].iov_len) break;
    }
    return total;
}

}  // namespace

result<size_t> file::do_preadv(const iovec* iov, int cnt, int64_t off, deadline_t d) noexcept {
    return per_element(iov, cnt, off, [&](const iovec& v, int64_t o) { return do_pread(v.iov_base, v.iov_len, o, d); });
}

result<size_t> file::do_pwritev(const iovec* iov, int cnt, int64_t off, deadline_t d) noexcept {
    return per_element(iov, cnt, off, [&](const iovec& v, int64_t o) { return do_pwrite(v.iov_base, v.iov_len, o, d); });
}

result<void> file::fallocate(int, int64_t, int64_t) noexcept { return errno_error(EOPNOTSUPP); }

result<size_t> file::read(void* buf, size_t n, duration timeout) noexcept {
    auto r = pread(buf, n, pos_, timeout);
    if (r) pos_ += static_cast<int64_t>(*r);
    return r;
}

result<size_t> file::write(const void* buf, size_t n, duration timeout) noexcept {
    auto r = pwrite(buf, n, pos_, timeout);
    if (r) pos_ += static_cast<int64_t>(*r);
    return r;
}

result<int64_t> file::lseek(int64_t off, int whence) noexcept {
    int64_t base = 0;
    switch (whence) {
        case SEEK_SET: break;
        case SEEK_CUR: base = pos_; break;
        case SEEK_END: {
            auto st = GLUON_TRY(fstat());
            base = st.st_size;
            break;
        }
        default: return errno_error(EINVAL);
    }
    // POSIX: a position off_t cannot hold is EOVERFLOW, a negative one EINVAL (the sum itself
    // must not overflow: a far SEEK_END or SEEK_CUR wrapped round to a negative position).
    int64_t to = 0;
    if (__builtin_add_overflow(base, off, &to)) return errno_error(off > 0 ? EOVERFLOW : EINVAL);
    if (to < 0) return errno_error(EINVAL);
    pos_ = to;
    return pos_;
}

result<void> file::pwrite_all(const void* buf, size_t n, int64_t off, duration timeout) noexcept {
    const deadline_t d = deadline_after(timeout);
    auto* p = static_cast<const char*>(buf);
    while (n > 0) {
        auto r = GLUON_TRY(do_pwrite(p, n, off, d));
        if (r == 0) return errno_error(EIO);  // a write that makes no progress would spin
        p += r;
        n -= r;
        off += static_cast<int64_t>(r);
    }
    return {};
}

result<void> file::pread_exactly(void* buf, size_t n, int64_t off, duration timeout) noexcept {
    const deadline_t d = deadline_after(timeout);
    auto* p = static_cast<char*>(buf);
    while (n > 0) {
        auto r = GLUON_TRY(do_pread(p, n, off, d));
        if (r == 0) return errno_error(ENODATA);
        p += r;
        n -= r;
        off += static_cast<int64_t>(r);
    }
    return {};
}

}  // namespace gluon::fs
