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

    result<size_t> do_pread(void* buf, size_t n, int64_t off, deadline_t d) noexcept override {
        if (int e = admit(n, d)) return errno_error(e);
        return in_->pread(buf, n, off, time_left(d));
    }
    result<size_t> do_pwrite(const void* buf, size_t n, int64_t off, deadline_t d) noexcept override {
        if (int e = admit(n, d)) return errno_error(e);
        return in_->pwrite(buf, n, off, time_left(d));
    }
    result<size_t> do_preadv(const iovec* iov, int cnt, int64_t off, deadline_t d) noexcept override {
        if (int e = admit(total(iov, cnt), d)) return errno_error(e);
        return in_->preadv(iov, cnt, off, time_left(d));
    }
    result<size_t> do_pwritev(const iovec* iov, int cnt, int64_t off, deadline_t d) noexcept override {
        if (int e = admit(total(iov, cnt), d)) return errno_error(e);
        return in_->pwritev(iov, cnt, off, time_left(d));
    }

private:
    static size_t total(const iovec* iov, int cnt) {
        size_t t = 0;
        for (int i = 0; i < cnt; ++i) t += iov[i].iov_len;
        return t;
    }

    // Returns 0, or the errno that ended the wait (ECANCELED: the fiber was interrupted;
    // ETIMEDOUT: the slot starts after the call's deadline, which is waited out first: the slot
    // stays taken, as a timed-out operation may have run).
    int admit(size_t bytes, deadline_t d) noexcept {
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
        auto r = this_fiber::sleep_until(std::min(start, d));  // parks a fiber; sleeps a thread
        if (!r) return r.error().value();
        return start > d ? ETIMEDOUT : 0;
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
