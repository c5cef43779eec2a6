#include "gluon/net/byte_stream.h"

#include <climits>
#include <cstring>
#include <memory>

#include "gluon/runtime/fd.h"

namespace gluon::net {
namespace {

const iovec* first_non_empty(const iovec* iov, int cnt) noexcept {
    for (int i = 0; i < cnt; ++i)
        if (iov[i].iov_len > 0) return &iov[i];
    return nullptr;
}

}  // namespace

result<size_t> byte_stream::do_readv(const iovec* iov, int cnt, duration timeout) {
    if (cnt < 0 || cnt > IOV_MAX) return errno_error(EINVAL);
    const iovec* v = first_non_empty(iov, cnt);
    if (!v) return size_t{0};
    return do_read_some(v->iov_base, v->iov_len, timeout);
}

result<size_t> byte_stream::do_writev(const iovec* iov, int cnt, duration timeout) {
    if (cnt < 0 || cnt > IOV_MAX) return errno_error(EINVAL);
    const iovec* v = first_non_empty(iov, cnt);
    if (!v) return size_t{0};
    return do_write_some(v->iov_base, v->iov_len, timeout);
}

result<void> byte_stream::read_exactly(void* buf, size_t n, duration timeout) {
    step_timeouts left(timeout);
    auto* p = static_cast<char*>(buf);
    while (n > 0) {
        size_t got = GLUON_TRY(do_read_some(p, n, left.next()));
        if (got == 0) return errno_error(ENODATA);
        p += got;
        n -= got;
    }
    return {};
}

result<void> byte_stream::write_all(const void* buf, size_t n, step_timeouts& left) {
    auto* p = static_cast<const char*>(buf);
    while (n > 0) {
        size_t put = GLUON_TRY(do_write_some(p, n, left.next()));
        if (put == 0) return errno_error(EPIPE);  // a transport that takes nothing would spin
        p += put;
        n -= put;
    }
    return {};
}

result<void> byte_stream::writev_all(const iovec* iov, int cnt, step_timeouts& left) {
    if (cnt < 0 || cnt > IOV_MAX) return errno_error(EINVAL);
    // The caller's array is const: after a short write, continue from a copy of the rest.
    constexpr int k_batch = 64;
    iovec rest[k_batch];
    while (cnt > 0) {
        int n = cnt < k_batch ? cnt : k_batch;
        std::memcpy(rest, iov, sizeof(iovec) * static_cast<size_t>(n));
        iov += n;
        cnt -= n;
        iovec* v = rest;
        while (n > 0) {
            while (n > 0 && v->iov_len == 0) ++v, --n;
            if (n == 0) break;
            size_t put = GLUON_TRY(do_writev(v, n, left.next()));
            if (put == 0) return errno_error(EPIPE);
            while (n > 0 && put >= v->iov_len) {
                put -= v->iov_len;
                ++v;
                --n;
            }
            if (n > 0) {
                v->iov_base = static_cast<char*>(v->iov_base) + put;
                v->iov_len -= put;
            }
        }
    }
    return {};
}

result<void> byte_stream::do_send_file(int file_fd, int64_t off, size_t n, step_timeouts& t) {
    if (off < 0) return errno_error(EINVAL);
    constexpr size_t k_chunk = 64 * 1024;
    std::unique_ptr<char[]> buf(new (std::nothrow) char[n < k_chunk ? n : k_chunk]);
    if (!buf) return errno_error(ENOMEM);
    while (n > 0) {
        size_t want = n < k_chunk ? n : k_chunk;
        size_t got = GLUON_TRY(fd::pread(file_fd, buf.get(), want, off, t.next()));
        if (got == 0) return errno_error(ENODATA);
        GLUON_TRY(write_all(buf.get(), got, t));
        off += static_cast<int64_t>(got);
        n -= got;
    }
    return {};
}

}  // namespace gluon::net
