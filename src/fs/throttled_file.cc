// throttled file: a reservation schedule per limit (GCRA without burst). Each operation
// reserves the earliest start that both limits allow and sleeps until then, so concurrent
// callers (on any vCPU) queue in arrival order without a timer of their own.
#include <algorithm>

#include "gluon/common/clock.h"
#include "gluon/common/spinlock.h"
#include "forwarding_file.h"
#include "gluon/fs/decorators.h"
#include "gluon/runtime/fiber.h"

namespace gluon::fs {
namespace {

class throttled_file final : public detail::forwarding_file {
public:
    throttled_file(std::unique_ptr<file> inner, throttle_limits l) : forwarding_file(std::move(inner)), lim_(l) {}

    result<size_t> pread(void* buf, size_t n, int64_t off) noexcept override {
        if (int e = admit(n)) return errno_error(e);
        return in_->pread(buf, n, off);
    }
    result<size_t> pwrite(const void* buf, size_t n, int64_t off) noexcept override {
        if (int e = admit(n)) return errno_error(e);
        return in_->pwrite(buf, n, off);
    }
    result<size_t> preadv(const iovec* iov, int cnt, int64_t off) noexcept override {
        if (int e = admit(total(iov, cnt))) return errno_error(e);
        return in_->preadv(iov, cnt, off);
    }
    result<size_t> pwritev(const iovec* iov, int cnt, int64_t off) noexcept override {
        if (int e = admit(total(iov, cnt))) return errno_error(e);
        return in_->pwritev(iov, cnt, off);
    }

private:
    static size_t total(const iovec* iov, int cnt) {
        size_t t = 0;
        for (int i = 0; i < cnt; ++i) t += iov[i].iov_len;
        return t;
    }

    // Returns 0, or the errno that ended the wait (ECANCELED: the fiber was interrupted).
    int admit(size_t bytes) noexcept {
        const int64_t now = mono_now_ns();
        int64_t start;
        {
            std::lock_guard lk(lk_);
            start = std::max({now, next_op_, next_byte_});
            if (lim_.iops > 0) next_op_ = start + static_cast<int64_t>(1e9 / lim_.iops);
            if (lim_.bytes_per_s > 0)
                next_byte_ = start + static_cast<int64_t>(static_cast<double>(bytes) * 1e9 / lim_.bytes_per_s);
        }
        if (start <= now) return 0;
        auto r = this_fiber::sleep_until(start);  // parks a fiber; sleeps a plain thread
        return r ? 0 : r.error().value();
    }

    throttle_limits lim_;
    spinlock lk_;
    int64_t next_op_ = 0, next_byte_ = 0;
};

}  // namespace

std::unique_ptr<file> make_throttled(std::unique_ptr<file> inner, throttle_limits limits) {
    return std::unique_ptr<file>(new throttled_file(std::move(inner), limits));
}

}  // namespace gluon::fs
