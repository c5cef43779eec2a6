// A session's reader fiber: control messages from the socket, and the receive queue drained on
// each Polling message. Everything the peer wrote is checked here before anyone uses it.
#include <algorithm>
#include <cstring>

#include "gluon/common/log.h"
#include "gluon/sys/proc.h"
#include "session_impl.h"

namespace gluon::ipc::detail {
namespace {
constexpr size_t k_read_buffer = 64 << 10;
std::error_code code(errc e) { return make_error_code(e); }
}  // namespace

void session_impl::read_loop() noexcept {
    linger_ns = opts.poll_linger.count() > 0 ? opts.poll_linger.count() : 0;
    std::vector<uint8_t> buf(k_read_buffer);
    size_t have = 0;
    std::error_code end;
    bool hung_up = false;  // the peer hung up: an end of file, or its socket reset
    const uint32_t max_len = uint32_t(std::min<uint64_t>(UINT32_MAX, uint64_t(opts.max_fallback) + 16));
    for (;;) {
        auto r = sock.read_some(buf.data() + have, buf.size() - have);
        if (!r || *r == 0) {
            // Not an interrupt (close(), fail()) nor a timeout: this side shuts its socket down
            // only after the reader has ended, so an end of file is the peer's.
            hung_up = r || r.error() == std::errc::connection_reset || r.error() == std::errc::broken_pipe;
            end = hung_up ? errno_code(ECONNRESET) : r.error();
            break;
        }
        have += *r;
        size_t at = 0;
        for (;;) {
            wire::message m;
            auto n = wire::next_message({buf.data() + at, have - at}, max_len, m);
            if (!n) {
                end = n.error();
                goto out;
            }
            if (*n == 0) break;
            if (std::error_code e = on_message(m)) {
                end = e;
                goto out;
            }
            at += *n;
        }
        std::memmove(buf.data(), buf.data() + at, have - at);
        have -= at;
        if (have >= wire::k_header_size) {  // a long FallbackData in progress: room for all of it
            size_t need = wire::get_u32(buf.data());
            if (need > buf.size()) buf.resize(need);
        } else if (have == 0 && buf.size() > 4 * k_read_buffer) {
            buf.assign(k_read_buffer, 0);
            buf.shrink_to_fit();
        }
    }
out:
    if (end) GLUON_DEBUG("ipc: session ends: {}", end.message());
    {
        std::lock_guard lk(mu);
        reader_ending = true;  // an interrupt now would cut finish_queues' wait short
    }
    fail(end ? end : errno_code(ECONNRESET));
    finish_queues(hung_up);
    reader_done.store(true, std::memory_order_release);
}

std::error_code session_impl::on_message(const wire::message& m) noexcept {
    using wire::type;
    switch (m.head.kind) {
    case type::polling:
        stats.polls_received.fetch_add(1, std::memory_order_relaxed);
        return drain_queue();
    case type::stream_close:
        remote_close(wire::get_u32(m.body.data()));
        return {};
    case type::fallback_data: {
        auto f = wire::decode_fallback(m.body);
        if (!f) return f.error();
        stats.fallbacks_received.fetch_add(1, std::memory_order_relaxed);
        stats.messages_received.fetch_add(1, std::memory_order_relaxed);
        stats.bytes_received.fetch_add(f->payload.size(), std::memory_order_relaxed);
        std::lock_guard lk(mu);
        std::error_code ec;
        auto st = stream_for(f->stream_id, !client, ec);
        if (ec) return ec;
        if (!st || st->local_closed || f->payload.empty()) return {};
        // Unlike slices (bounded by the region), FallbackData is held on the heap until read: a
        // peer that sends more than the reader takes would exhaust this process's memory.
        if (fallback_buffered + f->payload.size() > std::max<size_t>(opts.max_buffered_fallback, opts.max_fallback))
            return code(errc::backlog_exceeded);
        fallback_buffered += f->payload.size();
        rx_message msg;
        msg.heap.assign(f->payload.begin(), f->payload.end());
        st->rx.push_back(std::move(msg));
        st->readable += f->payload.size();
        st->cv.notify_all();
        return {};
    }
    case type::hot_restart:
    case type::hot_restart_ack: {
        if (client != (m.head.kind == type::hot_restart)) return code(errc::unexpected_message);
        uint64_t epoch = wire::get_u64(m.body.data());
        std::lock_guard lk(mu);
        if (client) {
            hot_restart_epoch = epoch;
        } else if (auto it = hot_restarts.find(epoch); it != hot_restarts.end()) {
            it->second = true;
        }  // else an epoch never sent: nothing to acknowledge
        accept_cv.notify_all();
        return {};
    }
    default: return code(errc::unexpected_message);
    }
}

std::error_code session_impl::drain_queue() noexcept {
    for (;;) {
        queue_element e;
        for (;;) {
            auto o = recv_q.pop(e);
            if (o == queue_view::outcome::empty) break;
            if (o != queue_view::outcome::ok) return code(errc::bad_queue);
            if (std::error_code err = on_element(e)) return err;
        }
        // Let the fibers just woken run (they often answer at once) while the flag still tells
        // the peer not to send a wake-up; then linger: a peer that answers within the linger
        // costs neither side a system call.
        this_fiber::yield();
        if (linger_ns > 0 && recv_q.size() == 0) {
            // Each turn lets this vCPU's other fibers run; every few turns the OS may run
            // another thread here, the peer perhaps (spinning alone would only delay its answer
            // when both share a core). An interrupt (close() stopping the reader, which it then
            // joins) ends the linger: yield() never reports one.
            deadline_t until = mono_now_ns() + linger_ns;
            auto lingering = [&] {
                return recv_q.size() == 0 && mono_now_ns() < until && !this_fiber::interrupt_pending();
            };
            for (unsigned turn = 1; lingering(); ++turn) {
                this_fiber::yield();
                if (turn % 8 == 0) (void)sys::sched_yield();
            }
        }
        if (recv_q.mark_not_working()) return {};
    }
}

std::error_code session_impl::on_element(const queue_element& e) noexcept {
    uint32_t status = e.status & 0xff;  // shmipc-go reads only the low byte
    if (status == 1) {
        remote_close(e.stream_id);
        return {};
    }
    if (status != 0) return code(errc::bad_queue);
    std::vector<buffer_region::piece> pieces;
    if (auto r = region->region.read_chain(e.offset, pieces); !r) return r.error();
    size_t total = 0;
    for (const auto& p : pieces) total += p.size;
    stats.messages_received.fetch_add(1, std::memory_order_relaxed);
    stats.bytes_received.fetch_add(total, std::memory_order_relaxed);
    std::unique_lock lk(mu);
    std::error_code ec;
    auto st = stream_for(e.stream_id, !client, ec);
    if (ec) {
        lk.unlock();
        free_pieces(pieces);
        return ec;
    }
    if (!st || st->local_closed) {
        lk.unlock();
        free_pieces(pieces);  // data for a stream nobody reads: back to the lists
        return {};
    }
    rx_message msg;
    msg.pieces = std::move(pieces);
    st->rx.push_back(std::move(msg));
    st->readable += total;
    st->cv.notify_all();
    return {};
}

void session_impl::remote_close(uint32_t id) noexcept {
    std::lock_guard lk(mu);
    auto it = streams.find(id);
    if (it == streams.end()) return;
    it->second->remote_closed = true;
    it->second->cv.notify_all();
    // Closed on both sides: nothing more comes for this id. (A server keeps a stream it closed
    // first until now, so that data for it would not open a new one.)
    if (it->second->local_closed) streams.erase(it);
}

std::shared_ptr<stream_impl> session_impl::stream_for(uint32_t id, bool create, std::error_code& ec) {
    auto it = streams.find(id);
    if (it != streams.end()) return it->second;
    if (!create || closing || err) return nullptr;
    // Each new id costs memory until accepted: a client starting streams faster than the
    // server accepts them is refused rather than followed.
    if (accepted.size() >= opts.max_pending_streams) {
        ec = code(errc::backlog_exceeded);
        return nullptr;
    }
    auto st = make_stream(shared_from_this(), id);
    st->announced = true;  // the client opened it
    streams.emplace(id, st);
    accepted.push_back(st);
    accept_cv.notify_one();
    return st;
}

void session_impl::free_pieces(const std::vector<buffer_region::piece>& p) noexcept {
    for (const auto& x : p)
        if (auto r = region->region.push(x.abs); !r) fail(r.error());
}

}  // namespace gluon::ipc::detail
