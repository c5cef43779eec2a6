// ipc::stream: zero-copy and copying writes into slices, read views over received slices.
#include <algorithm>
#include <cstring>

#include "session_impl.h"

namespace gluon::ipc {
namespace {

using detail::session_impl;
using detail::stream_impl;

// Slices for n bytes: one slice when one is large enough, else a chain from the largest list
// down (as shmipc-go's WriteBytes). False (and nothing taken) if the region cannot supply them now.
result<bool> take_slices(buffer_region& r, size_t n, std::vector<uint32_t>& out) {
    out.clear();
    if (n <= r.max_slice()) {
        uint32_t s = GLUON_TRY(r.pop_fit(uint32_t(std::max<size_t>(n, 1))));
        if (s == buffer_region::k_none) return false;
        out.push_back(s);
        return true;
    }
    size_t remain = n;
    for (size_t i = r.lists(); i-- > 0 && remain > 0;) {
        while (remain > 0) {
            uint32_t s = GLUON_TRY(r.pop(i));
            if (s == buffer_region::k_none) break;
            out.push_back(s);
            remain -= std::min<size_t>(remain, r.list(i).data_cap);
        }
    }
    if (remain == 0) return true;
    for (uint32_t s : out) GLUON_TRY(r.push(s));
    out.clear();
    return false;
}

// The most the region can ever hold in one message (a list never gives out its last slice).
uint64_t region_capacity(const buffer_region& r) noexcept {
    uint64_t n = 0;
    for (size_t i = 0; i < r.lists(); ++i) n += uint64_t(r.list(i).cap - 1) * r.list(i).data_cap;
    return n;
}

// Slices for n bytes, waiting while the region is full. True: send n as FallbackData instead.
result<bool> acquire(session_impl& s, size_t n, deadline_t dl, std::vector<uint32_t>& out) {
    buffer_region& r = s.region->region;
    if (n > region_capacity(r)) return true;
    deadline_t fb = s.opts.fallback_after == forever ? k_no_deadline : deadline_after(s.opts.fallback_after);
    for (;;) {
        auto got = take_slices(r, n, out);
        if (!got) {
            s.fail(got.error());
            return unexpected(got.error());
        }
        if (*got) return false;
        auto w = s.wait_space(std::min(dl, fb));
        if (!w) {
            if (w.error() == std::errc::timed_out && fb <= dl) return true;
            return unexpected(w.error());
        }
    }
}

// For writes.
result<void> usable(const stream_impl& st) {
    std::lock_guard lk(st.s->mu);
    if (st.s->err) return unexpected(st.s->err);
    if (st.local_closed || st.write_closed) return errno_error(EPIPE);
    return {};
}

// Tells the peer this side writes no more: a close element, or StreamClose if the queue is full.
result<void> end_writing(stream_impl& st, deadline_t dl) {
    session_impl& s = *st.s;
    {
        std::lock_guard lk(s.mu);
        if (st.write_closed) return {};
        st.write_closed = true;
        if (!st.announced || s.err) return {};  // the peer never heard of it, or is gone
    }
    queue_view::outcome o;
    {
        std::lock_guard lk(s.send_mu);
        o = s.send_q.put({st.id, 0, 1});
    }
    if (o == queue_view::outcome::ok) {
        s.wake_peer(dl);
        return {};
    }
    uint8_t m[12];
    wire::encode_header(m, 12, s.version, wire::type::stream_close);
    wire::put_u32(m + 8, st.id);
    return s.write_control(m, sizeof m, dl);
}

void give_back(session_impl& s, const std::vector<uint32_t>& slices) {
    for (uint32_t x : slices) (void)s.region->region.push(x);
    // Writers waiting for space (rare) also look again on their own every 200 us, so a wake-up
    // missed between a writer's failed attempt and its count is only late, never lost.
    if (s.space_waiters.load(std::memory_order_acquire) == 0) return;
    std::lock_guard lk(s.mu);
    s.space_cv.notify_all();
}

// Sends a filled chain as one message.
result<void> publish(stream_impl& st, const std::vector<uint32_t>& slices, size_t n, deadline_t dl) {
    session_impl& s = *st.s;
    st.announced = true;
    auto r = s.enqueue({st.id, slices.front(), 0}, dl);
    if (!r) {
        give_back(s, slices);
        return r;
    }
    s.stats.messages_sent.fetch_add(1, std::memory_order_relaxed);
    s.stats.bytes_sent.fetch_add(n, std::memory_order_relaxed);
    return {};
}

}  // namespace

uint32_t stream::id() const noexcept { return impl_ ? impl_->id : 0; }
const void* stream::owner() const noexcept { return impl_ ? impl_->s.get() : nullptr; }

bool stream::in_fallback() const noexcept { return impl_ && impl_->fallback.load(std::memory_order_relaxed); }

result<void> stream::send(const void* buf, size_t n, duration timeout) {
    if (!impl_) return errno_error(EBADF);
    GLUON_TRY(usable(*impl_));
    session_impl& s = *impl_->s;
    if (n == 0) return {};
    deadline_t dl = deadline_after(timeout);
    // A stream is a byte stream: a large write goes as several messages of a few slices, so the
    // reader starts on the first while the rest is being copied (as a socket streams).
    const size_t chunk = size_t(s.region->region.max_slice()) * 2;
    if (n > chunk && !impl_->fallback.load(std::memory_order_relaxed) &&
        n <= region_capacity(s.region->region)) {
        const auto* p = static_cast<const uint8_t*>(buf);
        for (size_t done = 0; done < n; done += chunk)
            GLUON_TRY(send(p + done, std::min(chunk, n - done), time_left(dl)));
        return {};
    }
    std::vector<uint32_t> slices;
    bool fallback = impl_->fallback.load(std::memory_order_relaxed) || GLUON_TRY(acquire(s, n, dl, slices));
    if (fallback) {
        impl_->fallback.store(true, std::memory_order_relaxed);
        impl_->announced = true;
        return s.write_fallback(impl_->id, static_cast<const uint8_t*>(buf), n, time_left(dl));
    }
    buffer_region& r = s.region->region;
    const auto* src = static_cast<const uint8_t*>(buf);
    size_t left = n;
    for (size_t i = 0; i < slices.size(); ++i) {
        uint32_t abs = slices[i];
        uint32_t cap = r.list(*r.locate(abs)).data_cap;
        uint32_t k = uint32_t(std::min<size_t>(left, cap));
        std::memcpy(r.data(abs), src, k);
        r.set_field(abs, buffer_region::k_size, k);
        r.set_field(abs, buffer_region::k_start, 0);
        if (i + 1 < slices.size()) r.link(abs, slices[i + 1]);
        src += k;
        left -= k;
    }
    return publish(*impl_, slices, n, dl);
}

result<std::span<uint8_t>> stream::reserve(size_t n, duration timeout) {
    if (!impl_) return errno_error(EBADF);
    if (impl_->reserving) return errno_error(EINVAL);
    GLUON_TRY(usable(*impl_));
    session_impl& s = *impl_->s;
    buffer_region& r = s.region->region;
    std::vector<uint32_t> slices;
    bool heap = impl_->fallback.load(std::memory_order_relaxed) || n > r.max_slice() ||
                GLUON_TRY(acquire(s, n, deadline_after(timeout), slices));
    impl_->reserving = true;
    impl_->reserved_size = n;
    if (heap) {
        impl_->reserved = buffer_region::k_none;
        impl_->reserved_heap.resize(n);
        return std::span<uint8_t>(impl_->reserved_heap.data(), n);
    }
    impl_->reserved = slices.front();
    return std::span<uint8_t>(r.data(impl_->reserved), n);
}

result<void> stream::commit(size_t n, duration timeout) {
    if (!impl_) return errno_error(EBADF);
    if (!impl_->reserving || n > impl_->reserved_size) return errno_error(EINVAL);
    session_impl& s = *impl_->s;
    impl_->reserving = false;
    uint32_t abs = std::exchange(impl_->reserved, buffer_region::k_none);
    if (abs == buffer_region::k_none) {
        auto heap = std::move(impl_->reserved_heap);
        impl_->reserved_heap = {};
        if (n == 0) return {};
        GLUON_TRY(usable(*impl_));
        impl_->fallback.store(true, std::memory_order_relaxed);
        impl_->announced = true;
        return s.write_fallback(impl_->id, heap.data(), n, timeout);
    }
    std::vector<uint32_t> slices{abs};
    if (n == 0) {
        give_back(s, slices);
        return {};
    }
    if (auto u = usable(*impl_); !u) {
        give_back(s, slices);
        return u;
    }
    s.region->region.set_field(abs, buffer_region::k_size, uint32_t(n));
    s.region->region.set_field(abs, buffer_region::k_start, 0);
    return publish(*impl_, slices, n, deadline_after(timeout));
}

result<std::span<const uint8_t>> stream::read_view(duration timeout) {
    if (!impl_) return errno_error(EBADF);
    stream_impl& st = *impl_;
    session_impl& s = *st.s;
    deadline_t dl = deadline_after(timeout);
    std::vector<uint32_t> empty;  // empty slices passed over: already off their messages
    bool interrupted = false;     // a wait ended by an interrupt that found data after all
    std::unique_lock lk(s.mu);
    // Every return gives those back (after unlocking: give_back may take s.mu), or they would
    // be lost to both sides for the region's life.
    auto finish = [&](result<std::span<const uint8_t>> v) {
        lk.unlock();
        if (!empty.empty()) give_back(s, empty);
        // What came first wins, and the interrupt stays pending for the next call (fiber.h): a
        // fiber interrupted to stop reading would otherwise read on and wait again without end.
        if (interrupted && (v || v.error() != std::errc::operation_canceled)) restore_interrupt();
        return v;
    };
    for (;;) {
        while (!st.rx.empty()) {
            detail::rx_message& m = st.rx.front();
            if (m.pieces.empty()) {
                if (m.pos < m.heap.size())
                    return finish(std::span<const uint8_t>(m.heap.data() + m.pos, m.heap.size() - m.pos));
                st.rx.pop_front();
                continue;
            }
            if (m.index < m.pieces.size()) {
                const auto& p = m.pieces[m.index];
                if (m.pos < p.size) return finish(std::span<const uint8_t>(p.data + m.pos, p.size - m.pos));
                empty.push_back(p.abs);  // an empty slice in a chain: nothing to read in it
                ++m.index;
                m.pos = 0;
                continue;
            }
            st.rx.pop_front();
        }
        if (st.local_closed) return finish(errno_error(EPIPE));
        if (s.err) return finish(unexpected(s.err));
        if (st.remote_closed) return finish(errno_error(ENODATA));
        if (interrupted) return finish(errno_error(ECANCELED));  // what came was no data after all
        long r = st.cv.wait_interruptible(lk, dl);
        if (r < 0 && st.rx.empty()) return finish(errno_error(int(-r)));
        interrupted = r == -ECANCELED;
    }
}

void stream::consume(size_t n) noexcept {
    if (!impl_) return;
    stream_impl& st = *impl_;
    session_impl& s = *st.s;
    std::vector<uint32_t> done;
    {
        std::lock_guard lk(s.mu);
        while (n > 0 && !st.rx.empty()) {
            detail::rx_message& m = st.rx.front();
            size_t avail = m.pieces.empty() ? m.heap.size() - m.pos : m.pieces[m.index].size - m.pos;
            size_t k = std::min(n, avail);
            m.pos += k;
            n -= k;
            st.readable -= k;
            if (m.pieces.empty()) s.fallback_buffered -= k;
            if (k < avail) break;
            if (!m.pieces.empty()) {
                done.push_back(m.pieces[m.index].abs);
                ++m.index;
                m.pos = 0;
                if (m.index < m.pieces.size()) continue;
            }
            st.rx.pop_front();
        }
    }
    if (!done.empty()) give_back(s, done);
}

result<size_t> stream::recv_some(void* buf, size_t n, duration timeout) {
    if (n == 0) return size_t{0};
    auto v = GLUON_TRY(read_view(timeout));
    size_t k = std::min(n, v.size());
    std::memcpy(buf, v.data(), k);
    consume(k);
    return k;
}

result<void> stream::recv_exactly(void* buf, size_t n, duration timeout) {
    step_timeouts t(timeout);
    auto* p = static_cast<uint8_t*>(buf);
    while (n > 0) {
        size_t k = GLUON_TRY(recv_some(p, n, t.next()));
        p += k;
        n -= k;
    }
    return {};
}

bool stream::is_open() const noexcept {
    if (!impl_) return false;
    std::lock_guard lk(impl_->s->mu);
    return !impl_->s->err && !impl_->local_closed && !impl_->write_closed && !impl_->remote_closed;
}

size_t stream::readable() const noexcept {
    if (!impl_) return 0;
    std::lock_guard lk(impl_->s->mu);
    return impl_->readable;
}

result<void> stream::do_close() noexcept {
    if (!impl_) return {};
    stream_impl& st = *impl_;
    session_impl& s = *st.s;
    // Bounded: a peer that takes neither its queue nor its socket would hold close() forever.
    auto told = end_writing(st, deadline_after(s.opts.close_timeout));
    std::deque<detail::rx_message> rx;
    {
        std::lock_guard lk(s.mu);
        if (st.local_closed) return told;
        st.local_closed = true;
        rx.swap(st.rx);
        st.readable = 0;
        for (const auto& m : rx)
            if (m.pieces.empty()) s.fallback_buffered -= m.heap.size() - m.pos;
        // The client forgets the stream now (the peer's data for it is dropped); the server keeps
        // it until the client closes it too, or data for it would open a new stream. A client
        // may never close it, so the server keeps only the latest such streams.
        if (s.client || st.remote_closed) {
            s.streams.erase(st.id);
        } else {
            s.closed_first.push_back(st.id);
            while (s.closed_first.size() > std::max<size_t>(s.opts.max_pending_streams, 1)) {
                auto it = s.streams.find(s.closed_first.front());
                s.closed_first.pop_front();
                if (it != s.streams.end() && it->second->local_closed) s.streams.erase(it);
            }
        }
        st.cv.notify_all();
    }
    std::vector<uint32_t> unread;
    for (auto& m : rx)
        for (size_t i = m.index; i < m.pieces.size(); ++i) unread.push_back(m.pieces[i].abs);
    if (st.reserving && st.reserved != buffer_region::k_none) unread.push_back(st.reserved);
    st.reserving = false;
    st.reserved = buffer_region::k_none;
    if (!unread.empty()) give_back(s, unread);
    return told;
}

result<void> stream::do_shutdown(duration timeout) {
    if (!impl_) return errno_error(EBADF);
    return end_writing(*impl_, deadline_after(timeout));
}

result<size_t> stream::do_read_some(void* buf, size_t n, duration timeout) {
    auto r = recv_some(buf, n, timeout);
    if (!r && r.error() == std::errc::no_message_available) return size_t{0};  // end of stream
    return r;
}

result<size_t> stream::do_write_some(const void* buf, size_t n, duration timeout) {
    GLUON_TRY(send(buf, n, timeout));
    return n;
}

}  // namespace gluon::ipc
