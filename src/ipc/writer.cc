// The sending side of a session: slices, the send queue, wake-ups and FallbackData.
#include <sys/uio.h>

#include <algorithm>
#include <cstring>

#include "gluon/sys/ops.h"
#include "session_impl.h"

namespace gluon::ipc::detail {
namespace {
// How long a writer sleeps between looks at a full region or queue: the peer frees slices and
// pops elements without telling us, so space is noticed by looking.
constexpr auto k_space_poll = std::chrono::microseconds(200);
}  // namespace

result<void> session_impl::write_control(const uint8_t* p, size_t n, duration timeout) {
    std::lock_guard lk(write_mu);
    // A control message is a few bytes and the socket buffer almost never full: one send(2)
    // now, rather than an operation queued on the engine (io_uring submits queued operations
    // only once this vCPU runs out of ready fibers, and a lingering reader keeps it busy).
    long k = sys::send(sock.get(), p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k == long(n)) return {};
    if (k > 0) {
        p += k;
        n -= size_t(k);
    }
    auto r = sock.write_all(p, n, timeout);
    if (!r && r.error() != std::errc::timed_out && r.error() != std::errc::operation_canceled)
        fail(errno_code(ECONNRESET));
    return r;
}

result<void> session_impl::write_fallback(uint32_t id, const uint8_t* p, size_t n, duration timeout) {
    // A receiver ends the session on FallbackData above its max_fallback (64 MiB by default, on
    // both sides): a larger write goes as several messages of at most that many bytes, in order.
    const size_t piece = std::clamp<size_t>(opts.max_fallback, 1, UINT32_MAX - 16);
    deadline_t dl = deadline_after(timeout);
    size_t done = 0;
    do {
        const size_t k = std::min(piece, n - done);
        uint8_t prefix[16];
        wire::encode_fallback_prefix(prefix, version, id, uint32_t(k));
        iovec iov[2] = {{prefix, sizeof prefix}, {const_cast<uint8_t*>(p + done), k}};
        {
            std::lock_guard lk(write_mu);
            auto r = sock.writev_all(iov, k ? 2 : 1, time_left(dl));
            if (!r) {
                if (r.error() != std::errc::timed_out && r.error() != std::errc::operation_canceled)
                    fail(errno_code(ECONNRESET));
                return r;
            }
        }
        stats.fallbacks_sent.fetch_add(1, std::memory_order_relaxed);
        stats.messages_sent.fetch_add(1, std::memory_order_relaxed);
        stats.bytes_sent.fetch_add(k, std::memory_order_relaxed);
        done += k;
    } while (done < n);
    return {};
}

void session_impl::wake_peer() noexcept {
    if (!send_q.mark_working()) return;  // the peer's reader is running, or already woken
    uint8_t h[wire::k_header_size];
    wire::encode_header(h, wire::k_header_size, version, wire::type::polling);
    if (write_control(h, sizeof h)) stats.polls_sent.fetch_add(1, std::memory_order_relaxed);
}

result<void> session_impl::wait_space(deadline_t dl) {
    stats.full_waits.fetch_add(1, std::memory_order_relaxed);
    std::unique_lock lk(mu);
    if (err) return unexpected(err);
    if (mono_now_ns() >= dl) return errno_error(ETIMEDOUT);
    deadline_t soon = std::min<deadline_t>(dl, deadline_after(k_space_poll));
    space_waiters.fetch_add(1, std::memory_order_acq_rel);
    long r = space_cv.wait_interruptible(lk, soon);
    space_waiters.fetch_sub(1, std::memory_order_acq_rel);
    if (err) return unexpected(err);
    if (r == -ECANCELED) return errno_error(ECANCELED);
    if (r == -ETIMEDOUT && soon == dl) return errno_error(ETIMEDOUT);
    return {};
}

result<void> session_impl::enqueue(const queue_element& e, deadline_t dl) {
    for (;;) {
        queue_view::outcome o;
        {
            std::lock_guard lk(send_mu);
            o = send_q.put(e);
        }
        if (o == queue_view::outcome::ok) break;
        if (o == queue_view::outcome::bad) {
            fail(make_error_code(errc::bad_queue));
            return unexpected(make_error_code(errc::bad_queue));
        }
        wake_peer();  // a full queue whose consumer sleeps would stay full
        GLUON_TRY(wait_space(dl));
    }
    wake_peer();
    return {};
}

}  // namespace gluon::ipc::detail
