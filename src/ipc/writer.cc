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

result<void> session_impl::check_up() {
    std::lock_guard lk(mu);
    if (err) return unexpected(err);
    return {};
}

result<void> session_impl::write_control(const uint8_t* p, size_t n, deadline_t dl) {
    if (!write_mu.try_lock()) GLUON_TRY(write_mu.lock_until(dl, false));
    std::lock_guard lk(write_mu, std::adopt_lock);
    // After close() the socket is gone (EBADF): the caller learns why the session ended.
    GLUON_TRY(check_up());
    return write_locked(p, n, dl);
}

result<void> session_impl::write_locked(const uint8_t* p, size_t n, deadline_t dl) {
    // A control message is a few bytes and the socket buffer almost never full: one send(2)
    // now, rather than an operation queued on the engine (io_uring submits queued operations
    // only once this vCPU runs out of ready fibers, and a lingering reader keeps it busy).
    long k = sys::send(sock.get(), p, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (k == long(n)) return {};
    const size_t sent = k > 0 ? size_t(k) : 0;
    iovec rest{const_cast<uint8_t*>(p + sent), n - sent};
    return write_rest(&rest, 1, sent, dl);
}

result<void> session_impl::write_rest(iovec* iov, int cnt, size_t sent, deadline_t dl) {
    while (cnt > 0) {
        if (iov->iov_len == 0) {
            ++iov;
            --cnt;
            continue;
        }
        auto r = sock.writev(iov, cnt, time_left(dl));
        if (!r || *r == 0) {
            const std::error_code e = r ? errno_code(EPIPE) : r.error();
            const bool waited = e == std::errc::timed_out || e == std::errc::operation_canceled;
            // The socket carries one message after another: the peer would read our next one as
            // the rest of this, so a message cut short ends the session. One not begun leaves it
            // as it was.
            if (!waited) fail(errno_code(ECONNRESET));
            else if (sent > 0) fail(e);
            return unexpected(e);
        }
        size_t put = *r;
        sent += put;
        while (cnt > 0 && put >= iov->iov_len) {
            put -= iov->iov_len;
            ++iov;
            --cnt;
        }
        if (cnt > 0) {
            iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + put;
            iov->iov_len -= put;
        }
    }
    return {};
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
            if (!write_mu.try_lock()) GLUON_TRY(write_mu.lock_until(dl, false));
            std::lock_guard lk(write_mu, std::adopt_lock);
            GLUON_TRY(check_up());
            GLUON_TRY(write_rest(iov, k ? 2 : 1, 0, dl));
        }
        stats.fallbacks_sent.fetch_add(1, std::memory_order_relaxed);
        stats.messages_sent.fetch_add(1, std::memory_order_relaxed);
        stats.bytes_sent.fetch_add(k, std::memory_order_relaxed);
        done += k;
    } while (done < n);
    return {};
}

void session_impl::wake_peer(deadline_t dl) noexcept {
    if (!send_q.mark_working()) return;  // the peer's reader is running, or already woken
    uint8_t h[wire::k_header_size];
    wire::encode_header(h, wire::k_header_size, version, wire::type::polling);
    auto r = write_control(h, sizeof h, dl);
    if (r) {
        stats.polls_sent.fetch_add(1, std::memory_order_relaxed);
        return;
    }
    if (r.error() != std::errc::timed_out && r.error() != std::errc::operation_canceled) return;  // failed
    {
        std::lock_guard lk(mu);
        if (err) return;
    }
    // The socket stayed full (or another message held it) until the writer's deadline. The
    // flag now tells every other writer that a wake-up is on its way, so it must still go or the
    // peer never looks at the queue again: a fiber sends it, and the writer, whose message is
    // queued, keeps its deadline. One such fiber waits at a time; it sends for every writer that
    // came before it took the socket.
    if (wake_pending.exchange(true, std::memory_order_acq_rel)) return;
    auto self = shared_from_this();
    auto f = spawn(fiber_options{.name = "ipc wake-up"}, [self] {
        std::lock_guard lk(self->write_mu);
        self->wake_pending.store(false, std::memory_order_release);
        {
            std::lock_guard g(self->mu);
            if (self->err) return;  // the socket may be closed already
        }
        uint8_t m[wire::k_header_size];
        wire::encode_header(m, wire::k_header_size, self->version, wire::type::polling);
        // No deadline: the session's end (its socket shut down) is what stops it.
        if (self->write_locked(m, sizeof m, k_no_deadline))
            self->stats.polls_sent.fetch_add(1, std::memory_order_relaxed);
    });
    if (!f) {
        fail(f.error());
        return;
    }
    (void)f->detach();
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
            // The error is read under send_mu: release_all drains the send queue under it once
            // the session has ended, so an element put after that drain (its slices then never
            // given back) would be one put after the end, which this refuses.
            std::lock_guard lk(send_mu);
            {
                std::lock_guard g(mu);
                if (err) return unexpected(err);
            }
            o = send_q.put(e);
        }
        if (o == queue_view::outcome::ok) break;
        if (o == queue_view::outcome::bad) {
            fail(make_error_code(errc::bad_queue));
            return unexpected(make_error_code(errc::bad_queue));
        }
        wake_peer(dl);  // a full queue whose consumer sleeps would stay full
        GLUON_TRY(wait_space(dl));
    }
    wake_peer(dl);
    return {};
}

}  // namespace gluon::ipc::detail
