// The WebSocket message loop: frames out (send_*, ping, pongs, close) and messages in (recv),
// and the closing handshake. The opening handshakes are in websocket_open.cc.
#include <sys/socket.h>

#include <cstring>

#include "gluon/common/log.h"
#include "gluon/net/socket.h"
#include "gluon/runtime/waiter.h"
#include "gluon/sys/ops.h"
#include "websocket_handshake.h"
#include "websocket_state.h"

namespace gluon::http {

using namespace ws;

namespace {

constexpr auto k_fail_linger = std::chrono::seconds(1);
constexpr uint64_t k_drain_limit = 64 * 1024;
constexpr size_t k_copy_below = 4096;  // smaller payloads leave in one buffer with their head
constexpr size_t k_mask_chunk = 64 * 1024;
constexpr size_t k_coalesce_max = 64 * 1024;  // output held back by coalesce_sends
constexpr size_t k_direct_read = 256 * 1024;  // a large payload's step, read past the buffer
constexpr size_t k_keep_capacity = 1 << 20;   // a larger assembly buffer is not kept

duration min_d(duration a, duration b) noexcept { return a < b ? a : b; }

// Codes a close frame may carry (RFC 6455 7.4; 1012-1014 are registered since).
bool sendable_code(uint16_t c) noexcept {
    return (c >= 1000 && c <= 1003) || (c >= 1007 && c <= 1014) || (c >= 3000 && c <= 4999);
}

bool transient(const std::error_code& e) noexcept {
    return e == std::errc::timed_out || e == std::errc::operation_canceled;
}

}  // namespace

websocket::state::state(net::byte_stream& stream, bool server_side, const websocket_options& o)
    : s(&stream), server(server_side), opts(o), rbuf(new uint8_t[k_buffer]) {}

void websocket::state::preload(std::string_view bytes) {
    if (bytes.empty()) return;
    if (bytes.size() > rcap - rend) {
        size_t cap = rend + bytes.size();
        std::unique_ptr<uint8_t[]> b(new uint8_t[cap]);
        std::memcpy(b.get(), rbuf.get(), rend);
        rbuf = std::move(b);
        rcap = cap;
    }
    std::memcpy(rbuf.get() + rend, bytes.data(), bytes.size());
    rend += bytes.size();
}

namespace {

using state = websocket::state;

// Appends a whole frame (a client's masked) to the output buffer.
void append_frame(state& st, uint8_t opcode, bool fin, std::string_view data) {
    uint8_t head[k_max_head];
    const bool mask = !st.server;
    const uint32_t key = mask ? random_mask() : 0;
    const size_t hn = encode_head(head, opcode, fin, data.size(), mask, key);
    const size_t at = st.sbuf.size();
    st.sbuf.resize(at + hn + data.size());
    auto* p = reinterpret_cast<uint8_t*>(st.sbuf.data()) + at;
    std::memcpy(p, head, hn);
    if (mask) mask_copy(p + hn, reinterpret_cast<const uint8_t*>(data.data()), data.size(), key, 0);
    else if (!data.empty()) std::memcpy(p + hn, data.data(), data.size());
}

// True if a whole frame waits in the receive buffer: the next recv() returns without reading.
bool frame_buffered(const state& st) noexcept {
    ws::frame_head h;
    const size_t avail = st.rend - st.rstart;
    return decode_head(st.rbuf.get() + st.rstart, avail, st.server, h).state == decode_result::complete &&
           h.length <= avail - h.head_bytes;
}

// Ends the connection under a fiber parked in recv(), for a close() that may not read beside
// it (or in a send, for a recv() that may not write beside it, or after a send failed): both
// directions are shut down, so that its read or write ends and it finds the connection gone.
void stop_under_reader(state& st) {
    st.failed = true;
    if (!st.peer_code) st.peer_code = close_code::abnormal;
    if (net::socket_fd* sock = st.s->socket()) (void)sys::shutdown(sock->get(), SHUT_RDWR);
}

// Writes the output buffer; the caller holds send_mu. A failed write fails the connection (a
// frame may be half written: nothing more can follow it) and ends it, so that a recv() parked
// in another fiber returns rather than wait for a peer that may never send again.
result<void> write_out(state& st, duration timeout) {
    auto r = st.s->write_all(st.sbuf.data(), st.sbuf.size(), timeout);
    st.sbuf.clear();
    st.held = false;
    if (st.sbuf.capacity() > 4 * k_mask_chunk) std::string().swap(st.sbuf);
    if (!r) stop_under_reader(st);
    return r;
}

struct unlocker {
    mutex& m;
    ~unlocker() { m.unlock(); }
};

// Sends one frame for the holder of send_mu; frames never interleave. With coalesce_sends, a
// data frame or pong sent while a whole received frame is waiting stays in the output buffer
// (up to k_coalesce_max), to leave with later ones in one write once recv() would have to wait
// for input. The writes take what is left of `t`.
result<void> send_locked(state& st, uint8_t opcode, bool fin, std::string_view data, step_timeouts& t) {
    if (st.failed || st.ended) return errno_error(EPIPE);
    if (st.close_sent) {
        // A close frame left while this one waited for the lock (close() beside a recv() that
        // echoes the peer's close or answers a ping, or two close() calls). No message may
        // follow it (RFC 6455 5.5.1), and neither a second close frame nor a pong is owed.
        if (opcode == op_close || opcode == op_pong) return {};
        return errno_error(EPIPE);
    }
    if (!is_control(opcode)) {
        // The peer would fail the connection on a message begun inside another or a
        // continuation of none; refusing it keeps the connection.
        if ((opcode == op_continuation) != st.out_msg) return errno_error(EINVAL);
        st.out_msg = !fin;
    }
    if (data.size() <= k_copy_below) {
        // Small: one buffer for the head and the payload (after any frames held back).
        append_frame(st, opcode, fin, data);
        if (st.opts.coalesce_sends && opcode != op_close && opcode != op_ping &&
            st.sbuf.size() <= k_coalesce_max && frame_buffered(st)) {
            st.held = true;
            return {};
        }
        GLUON_TRY(write_out(st, t.next()));
    } else {
        if (!st.sbuf.empty()) GLUON_TRY(write_out(st, t.next()));
        uint8_t head[k_max_head];
        const bool mask = !st.server;
        const uint32_t key = mask ? random_mask() : 0;
        const size_t hn = encode_head(head, opcode, fin, data.size(), mask, key);
        result<void> r;
        if (mask) {  // masked in pieces of k_mask_chunk, each written from the output buffer
            for (size_t off = 0; r && off < data.size();) {
                const size_t k = data.size() - off < k_mask_chunk ? data.size() - off : k_mask_chunk;
                st.sbuf.resize((off == 0 ? hn : 0) + k);
                auto* p = reinterpret_cast<uint8_t*>(st.sbuf.data());
                if (off == 0) std::memcpy(p, head, hn), p += hn;
                mask_copy(p, reinterpret_cast<const uint8_t*>(data.data()) + off, k, key, off);
                r = write_out(st, t.next());
                off += k;
            }
        } else {
            iovec v[2] = {{head, hn}, {const_cast<char*>(data.data()), data.size()}};
            r = st.s->writev_all(v, 2, t.next());
            if (!r) stop_under_reader(st);  // as in write_out
        }
        GLUON_TRY(r);
    }
    if (opcode == op_close) st.close_sent = true;
    return {};
}

// Sends one frame: the wait for the send lock and the writes share one deadline, `timeout` (or
// send_timeout) from now. Each had its own, so a send behind another that let go of the lock
// late took up to twice its timeout.
result<void> send_frame(state& st, uint8_t opcode, bool fin, std::string_view data, duration timeout) {
    step_timeouts t(min_d(timeout, st.opts.send_timeout));
    if (!st.send_mu.try_lock()) GLUON_TRY(st.send_mu.lock_for(t.next()));
    unlocker u{st.send_mu};
    return send_locked(st, opcode, fin, data, t);
}

// A pong: the send lock is waited for `lock_timeout` (what is left of the recv() that answers
// the ping), the writes then take up to `timeout` (or send_timeout).
result<void> send_frame(state& st, uint8_t opcode, bool fin, std::string_view data, duration timeout,
                        duration lock_timeout) {
    if (!st.send_mu.try_lock()) GLUON_TRY(st.send_mu.lock_for(lock_timeout));
    unlocker u{st.send_mu};
    step_timeouts t(min_d(timeout, st.opts.send_timeout));
    return send_locked(st, opcode, fin, data, t);
}

// Writes the frames coalesce_sends held back (before recv() waits for input), the wait for the
// send lock and the write within one `timeout` (or send_timeout).
result<void> flush_out(state& st, duration timeout) {
    if (!st.held) return {};
    step_timeouts t(min_d(timeout, st.opts.send_timeout));
    if (!st.send_mu.try_lock()) GLUON_TRY(st.send_mu.lock_for(t.next()));
    unlocker u{st.send_mu};
    if (!st.held) return {};
    return write_out(st, t.next());
}

std::string close_payload(uint16_t code, std::string_view reason) {
    std::string p;
    if (code == 0 || code == close_code::no_status) return p;
    p += static_cast<char>(code >> 8);
    p += static_cast<char>(code & 0xff);
    p += reason;
    return p;
}

// Ends the transport after the closing handshake. A server shuts its side down (the RFC has
// the server close TCP first); a client waits for that (up to close_timeout, within what is
// left of the caller's `wait`), then closes its socket if it owns it (a stream given to over()
// stays its owner's to close, as when the connection fails).
void end_transport(state& st, duration wait) {
    if (st.ended) return;
    st.ended = true;
    if (st.server) {
        (void)st.s->shutdown(k_fail_linger);
        return;
    }
    char buf[1024];
    deadline_t d = deadline_after(min_d(wait, st.opts.close_timeout));
    for (;;) {
        auto n = st.s->read_some(buf, sizeof buf, time_left(d));
        if (!n || *n == 0) break;
    }
    if (st.owned) (void)st.s->close();
}

// Fails the connection (RFC 6455 7.1.7): a close frame with `code`, then this side's FIN, then
// what the peer still sends is read and dropped for a moment, so that our close frame is not
// lost to a reset caused by unread input. All of it within k_fail_linger, less when the caller
// has less `left`.
result<void> fail(state& st, uint16_t code, int err, const char* why, duration left = forever) {
    GLUON_LOG_RATE_LIMITED(debug, std::chrono::seconds(1), "gluon: websocket: closing with {} ({})", code, why);
    step_timeouts t(min_d(left, k_fail_linger));
    if (!st.failed && !st.close_sent && !st.ended && sendable_code(code))
        (void)send_frame(st, op_close, true, close_payload(code, {}), t.next());
    st.failed = true;
    if (!st.peer_code) st.peer_code = close_code::abnormal;
    st.in_msg = st.in_frame = false;
    std::string().swap(st.partial);
    if (!st.ended) {
        st.ended = true;
        if (st.s->shutdown(t.next())) {
            char buf[4096];
            for (uint64_t drained = 0; drained < k_drain_limit;) {
                auto n = st.s->read_some(buf, sizeof buf, t.next());
                if (!n || *n == 0) break;
                drained += *n;
            }
        }
        if (st.owned) (void)st.s->close();
    }
    return errno_error(err);
}

// Reads more input into the buffer. ENODATA (and close status 1006) if the peer closed
// without a close frame.
result<void> fill(state& st, step_timeouts& t) {
    if (st.held) GLUON_TRY(flush_out(st, t.next()));
    if (st.rstart > 0) {
        std::memmove(st.rbuf.get(), st.rbuf.get() + st.rstart, st.rend - st.rstart);
        st.rend -= st.rstart;
        st.rstart = 0;
    }
    auto n = st.s->read_some(st.rbuf.get() + st.rend, st.rcap - st.rend, t.next());
    if (n && *n > 0) {
        st.rend += *n;
        return {};
    }
    if (!n && transient(n.error())) return unexpected(n.error());
    st.failed = st.ended = true;
    st.peer_code = close_code::abnormal;
    if (st.owned) (void)st.s->close();
    return n ? errno_error(ENODATA) : unexpected(n.error());
}

// Answers the last ping. The send lock is waited for as long as the recv() caller waits (its
// holder lets go within its own send's timeout), not send_timeout: other senders may hold it
// longer between them, and recv(forever) then failed with ETIMEDOUT and the ping went
// unanswered. If the caller's timeout ends first, the pong stays due for the next recv().
result<void> send_pong(state& st, duration wait) {
    if (!st.pong_due) return {};
    if (st.close_sent) {
        st.pong_due = false;
        return {};
    }
    auto r = send_frame(st, op_pong, true, st.pong, st.opts.send_timeout, wait);
    st.pong_due = !r && transient(r.error()) && !st.failed;  // the lock was not had: nothing sent
    if (!r && !transient(r.error())) return fail(st, close_code::abnormal, r.error().value(), "pong failed");
    return r;
}

// A control frame's payload has arrived whole; `wait`: what is left of the caller's timeout.
result<void> on_control(state& st, uint8_t opcode, const uint8_t* p, size_t n, duration wait) {
    if (opcode == op_pong) return {};
    if (opcode == op_ping) {
        st.pong.assign(reinterpret_cast<const char*>(p), n);
        st.pong_due = true;
        return send_pong(st, wait);
    }
    // Close.
    uint16_t code = close_code::no_status;
    if (n == 1) return fail(st, close_code::protocol_error, EPROTO, "close payload of one byte", wait);
    if (n >= 2) {
        code = static_cast<uint16_t>((p[0] << 8) | p[1]);
        if (!sendable_code(code)) return fail(st, close_code::protocol_error, EPROTO, "invalid close code", wait);
        utf8_validator v;
        if (!v.feed(p + 2, n - 2) || !v.complete())
            return fail(st, close_code::invalid_data, EILSEQ, "close reason not UTF-8", wait);
    }
    st.close_received = true;
    st.peer_code = code;
    st.peer_reason.assign(reinterpret_cast<const char*>(p) + (n >= 2 ? 2 : 0), n >= 2 ? n - 2 : 0);
    // The echo and the wait for the end of TCP share what is left of the caller's timeout: a
    // peer that sent its close and stopped reading (the send lock held by a send it does not
    // take, or our buffers full) held recv() up to send_timeout for an echo it will not read.
    step_timeouts t(wait);
    if (!st.close_sent) {
        auto r = send_frame(st, op_close, true, close_payload(code, {}), t.next());
        if (!r && !st.failed && !st.ended) {
            // The send lock was not had in time, nothing was sent: the send that holds it ends
            // with the connection, shut down under it (ending the transport through the stream
            // would write beside it). An interrupt the lock's wait took is the fiber's again.
            if (r.error() == std::errc::operation_canceled) restore_interrupt();
            stop_under_reader(st);
            st.ended = true;
            return errno_error(ENODATA);
        }
    }
    end_transport(st, t.next());
    return errno_error(ENODATA);
}

// Takes up to `left` payload bytes of the current frame; false if none are buffered.
result<size_t> take_payload(state& st, uint64_t left, step_timeouts& t) {
    size_t old = st.partial.size();
    size_t avail = st.rend - st.rstart;
    size_t k;
    if (avail) {
        k = left < avail ? static_cast<size_t>(left) : avail;
        st.partial.append(reinterpret_cast<const char*>(st.rbuf.get() + st.rstart), k);
        st.rstart += k;
    } else if (left >= st.rcap / 2) {
        // A large payload is read straight into the message, in steps, so that memory grows
        // with what arrives rather than with what a frame head claims.
        if (st.held) GLUON_TRY(flush_out(st, t.next()));
        const size_t want = left < k_direct_read ? static_cast<size_t>(left) : k_direct_read;
        st.partial.resize(old + want);
        auto n = st.s->read_some(st.partial.data() + old, want, t.next());
        if (!n || *n == 0) {
            st.partial.resize(old);
            if (n && *n == 0) {
                st.failed = st.ended = true;
                st.peer_code = close_code::abnormal;
                if (st.owned) (void)st.s->close();
                return errno_error(ENODATA);
            }
            if (!transient(n.error())) st.failed = st.ended = true, st.peer_code = close_code::abnormal;
            return unexpected(n.error());
        }
        k = *n;
        st.partial.resize(old + k);
    } else {
        return size_t{0};
    }
    auto* p = reinterpret_cast<uint8_t*>(st.partial.data()) + old;
    if (st.cur.masked) mask_copy(p, p, k, st.cur.mask, st.frame_done);
    return k;
}

}  // namespace

namespace {

// recv() for the holder of recv_mu.
result<void> recv_locked(state& st, websocket::message& m, duration timeout) {
    using kind = websocket::kind;
    if (st.close_received || st.failed || st.ended) return errno_error(ENODATA);
    step_timeouts t(timeout);
    GLUON_TRY(send_pong(st, t.next()));
    for (;;) {
        if (!st.in_frame) {
            frame_head h;
            const uint8_t* p = st.rbuf.get() + st.rstart;
            size_t avail = st.rend - st.rstart;
            auto d = decode_head(p, avail, st.server, h);
            if (d.state == decode_result::incomplete) {
                GLUON_TRY(fill(st, t));
                continue;
            }
            if (d.state == decode_result::invalid) return fail(st, d.close_code, EPROTO, d.why, t.next());
            if (is_control(h.opcode) && avail < h.head_bytes + h.length) {
                GLUON_TRY(fill(st, t));  // the head is decoded again once the payload is in
                continue;
            }
            if (st.in_msg && ++st.frames > st.opts.max_frames_per_message)
                return fail(st, close_code::policy_violation, EPROTO, "too many frames in a message",
                            t.next());
            if (is_control(h.opcode)) {
                uint8_t payload[k_max_control_payload];
                const size_t n = static_cast<size_t>(h.length);
                mask_copy(payload, p + h.head_bytes, n, h.mask, 0);
                st.rstart += h.head_bytes + n;
                GLUON_TRY(on_control(st, h.opcode, payload, n, t.next()));
                continue;
            }
            if (h.opcode == op_continuation ? !st.in_msg : st.in_msg)
                return fail(st, close_code::protocol_error, EPROTO,
                            st.in_msg ? "new message inside a fragmented one" : "continuation without a start",
                            t.next());
            if (!st.in_msg) {
                st.in_msg = true;
                st.msg_op = h.opcode;
                st.frames = 1;
                st.partial.clear();
                st.utf8.reset();
            }
            if (h.length > st.opts.max_message_bytes - st.partial.size())
                return fail(st, close_code::too_big, EMSGSIZE, "message too big", t.next());
            st.rstart += h.head_bytes;
            st.cur = h;
            st.frame_done = 0;
            st.in_frame = true;
        }
        while (st.frame_done < st.cur.length) {
            size_t old = st.partial.size();
            size_t k = GLUON_TRY(take_payload(st, st.cur.length - st.frame_done, t));
            if (k == 0) {
                GLUON_TRY(fill(st, t));
                continue;
            }
            st.frame_done += k;
            if (st.msg_op == op_text && !st.utf8.feed(reinterpret_cast<const uint8_t*>(st.partial.data()) + old, k))
                return fail(st, close_code::invalid_data, EILSEQ, "text not UTF-8", t.next());
        }
        st.in_frame = false;
        if (!st.cur.fin) continue;
        if (st.msg_op == op_text && !st.utf8.complete())
            return fail(st, close_code::invalid_data, EILSEQ, "text ends inside a character", t.next());
        st.in_msg = false;
        m.type = st.msg_op == op_text ? kind::text : kind::binary;
        m.data.swap(st.partial);
        st.partial.clear();  // keeps the capacity m had, for the next message
        if (st.partial.capacity() > k_keep_capacity) std::string().swap(st.partial);
        return {};
    }
}

// What close() returns once the connection has ended: success only if the peer's close frame
// came, completing the closing handshake. An end without it (close_status() 1006: the peer
// ended TCP, or the connection failed) would otherwise pass for a clean close.
result<void> handshake_result(const state& st) {
    if (st.close_received) return {};
    return errno_error(ECONNRESET);
}

}  // namespace

result<void> websocket::recv(message& m, duration timeout) {
    state& st = *st_;
    if (st.close_received || st.failed || st.ended) return errno_error(ENODATA);
    step_timeouts t(timeout);
    if (!st.recv_mu.try_lock()) GLUON_TRY(st.recv_mu.lock_for(t.next()));
    unlocker u{st.recv_mu};
    return recv_locked(st, m, t.next());
}

result<websocket::message> websocket::recv(duration timeout) {
    message m;
    GLUON_TRY(recv(m, timeout));
    return m;
}

result<void> websocket::send_text(std::string_view text, duration timeout) {
    return send_frame(*st_, op_text, true, text, timeout);
}

result<void> websocket::send_binary(std::string_view data, duration timeout) {
    return send_frame(*st_, op_binary, true, data, timeout);
}

result<void> websocket::send_fragment(kind type, std::string_view data, bool first, bool fin, duration timeout) {
    const uint8_t op = first ? static_cast<uint8_t>(type) : uint8_t{op_continuation};
    return send_frame(*st_, op, fin, data, timeout);
}

result<void> websocket::flush(duration timeout) { return flush_out(*st_, timeout); }

result<void> websocket::ping(std::string_view payload, duration timeout) {
    if (payload.size() > k_max_control_payload) return errno_error(EINVAL);
    return send_frame(*st_, op_ping, true, payload, timeout);
}

result<void> websocket::close(uint16_t code, std::string_view reason, duration timeout) {
    state& st = *st_;
    if ((code && !sendable_code(code)) || reason.size() > 123 || (!code && !reason.empty()))
        return errno_error(EINVAL);
    if (st.failed || st.ended) return handshake_result(st);
    if (timeout == forever) timeout = st.opts.close_timeout;
    step_timeouts t(timeout);
    // A fiber parked in recv() reads the peer's close frame: this call waits for its turn, which
    // comes when that recv() returns, rather than read beside it.
    const bool beside_reader = !st.recv_mu.try_lock();
    if (!st.close_sent) {
        auto r = send_frame(st, op_close, true, close_payload(code, reason), t.next());
        if (!r && beside_reader) {
            stop_under_reader(st);
            return r;
        }
        if (!r) {
            unlocker u{st.recv_mu};
            return fail(st, close_code::abnormal, r.error().value(), "close frame not sent");
        }
    }
    if (beside_reader) {
        if (auto l = st.recv_mu.lock_for(t.next()); !l) {
            stop_under_reader(st);  // no close frame in time
            return l;
        }
    }
    unlocker u{st.recv_mu};
    message m;
    while (!st.close_received && !st.ended && !st.failed) {  // the reader may have ended it
        auto r = recv_locked(st, m, t.next());
        if (!r && r.error() == std::errc::timed_out) {
            (void)fail(st, close_code::abnormal, ETIMEDOUT, "no close frame in time", t.next());
            return errno_error(ETIMEDOUT);
        }
        if (!r && r.error() != std::errc::no_message_available) return unexpected(r.error());
    }
    return handshake_result(st);
}

websocket::websocket(std::unique_ptr<state> st) noexcept : st_(std::move(st)) {}
websocket::websocket(websocket&&) noexcept = default;
websocket& websocket::operator=(websocket&&) noexcept = default;
websocket::~websocket() = default;

uint16_t websocket::close_status() const noexcept { return st_->peer_code; }
std::string_view websocket::close_reason() const noexcept { return st_->peer_reason; }
std::string_view websocket::subprotocol() const noexcept { return st_->subprotocol; }
bool websocket::is_open() const noexcept {
    return !st_->close_sent && !st_->close_received && !st_->failed && !st_->ended;
}
net::byte_stream& websocket::stream() noexcept { return *st_->s; }

}  // namespace gluon::http
