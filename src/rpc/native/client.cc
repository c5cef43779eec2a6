// The native RPC client: callers park on their own pending record (on their stack) until the
// reader fiber has decoded their response into place; requests leave through the writer fiber.
#include "gluon/rpc/native/client.h"

#include "conn.h"
#include "gluon/net/socket.h"
#include "gluon/runtime/oneshot.h"
#include "gluon/runtime/vcpu.h"
#include "wire.h"

#include <cstdlib>
#include <cstring>

namespace gluon::rpc {
namespace detail {

namespace {
constexpr size_t k_inline_head = 256;

struct cancel_frame : out_frame {
    size_t* queued; // the connection's count of cancels not yet written
    uint8_t head[wire::k_header_size];
};
void free_cancel(out_frame* f, bool) {
    auto* c = static_cast<cancel_frame*>(f);
    --*c->queued;
    delete c;
}
} // namespace

struct pending {
    out_frame out;
    client_conn* conn;
    const call_args* a;
    uint64_t id = 0;
    deadline_t until = k_no_deadline;
    bool in_table = false;
    std::error_code err;
    oneshot done;
    std::unique_ptr<uint8_t[]> heap_head;
    alignas(8) uint8_t head[k_inline_head];
};

struct client_conn {
    std::unique_ptr<net::byte_stream> s;
    client_options o;
    frame_reader rd;
    frame_writer wr;
    fiber reader;
    gluon::detail::vcpu* home = nullptr;
    bool closed = false;
    std::vector<pending*> slots; // request id's low 32 bits index it
    std::vector<uint32_t> free_slots;
    size_t in_flight = 0;
    size_t cancels_queued = 0;
    uint32_t seq = 0;
    result<void> stream_closed; // closing the stream, by the reader as the connection ended

    client_conn(std::unique_ptr<net::byte_stream> st, const client_options& opts)
        : s(std::move(st)), o(opts), rd(*s, opts.read_buffer_bytes), wr(*s) {}
    ~client_conn() { shut(); }

    uint64_t add(pending& p) {
        uint32_t slot;
        if (!free_slots.empty()) {
            slot = free_slots.back();
            free_slots.pop_back();
        } else {
            slot = static_cast<uint32_t>(slots.size());
            slots.push_back(nullptr);
        }
        slots[slot] = &p;
        if (++seq == 0) seq = 1; // ids are never 0
        // The slot finds the caller; the sequence number keeps a late response to a call that
        // gave up from matching the next call in the same slot.
        p.id = uint64_t(seq) << 32 | slot;
        p.in_table = true;
        ++in_flight;
        return p.id;
    }
    void remove(pending& p) {
        uint32_t slot = static_cast<uint32_t>(p.id);
        slots[slot] = nullptr;
        free_slots.push_back(slot);
        p.in_table = false;
        --in_flight;
    }
    pending* take(uint64_t id) {
        uint32_t slot = static_cast<uint32_t>(id);
        if (slot >= slots.size() || !slots[slot] || slots[slot]->id != id) return nullptr;
        pending* p = slots[slot];
        remove(*p);
        return p;
    }
    void fail_all(std::error_code e) {
        closed = true;
        for (pending* p : slots) {
            if (!p) continue;
            remove(*p);
            p->err = e;
            p->done.signal();
        }
    }
    // Each call that gives up after its request left queues one cancel; a server that stops
    // reading would let them pile up without end (callers keep timing out), so one over the
    // limit ends the connection instead: that server has read nothing for that many calls.
    void send_cancel(uint64_t id) {
        if (cancels_queued >= o.max_queued_cancels) {
            end();
            return;
        }
        auto* f = new cancel_frame;
        f->queued = &cancels_queued;
        ++cancels_queued;
        wire::header h;
        h.type = wire::kind::cancel;
        h.id = id;
        wire::put(h, f->head);
        f->iov.push(f->head, sizeof f->head);
        f->done = free_cancel;
        wr.push(*f);
    }
    // Ends the connection from one of its callers: the writer stops now (its queue is
    // dropped), the reader, interrupted, fails the calls in flight with connection_closed.
    void end() {
        closed = true;
        (void)reader.interrupt();
        wr.stop();
    }
    void read_loop();
    bool on_response(const wire::header& h);
    void shut() {
        closed = true;
        if (reader.joinable()) {
            (void)reader.interrupt();
            join_fully(reader);
        }
        wr.stop();
    }
};

void client_conn::read_loop() {
    for (;;) {
        auto h = rd.next_header();
        if (!h) break;
        if (auto e = wire::check(*h, o.max_frame_bytes)) {
            if (e == errc::frame_too_large && h->type == wire::kind::response) {
                if (pending* p = take(h->id)) {
                    p->err = e;
                    p->done.signal();
                }
                if (!rd.skip(h->length)) break;
                continue;
            }
            break;
        }
        if (h->type != wire::kind::response || !on_response(*h)) break;
    }
    fail_all(make_error_code(errc::connection_closed));
    wr.stop();
    // Neither fiber uses the stream now, and no call will: the socket goes as the connection
    // ends (the peer's end, an error, too many cancels), not with the last handle, which may
    // be kept long after (the peer saw no end, and the fd stayed taken, until then).
    stream_closed = s->close();
}

// False: the connection cannot go on.
bool client_conn::on_response(const wire::header& h) {
    pending* p = take(h.id);
    if (!p) return rd.skip(h.length).has_value(); // a call that gave up
    const call_args& a = *p->a;
    bool ok = true;
    bool skip_rest = false; // once p is handed back: skipping needs none of its memory
    // A read into p's response ended: by p's deadline (the server sends the rest slowly, or
    // not at all), which p's caller is waiting for, or by the connection's end.
    auto read_failed = [&](const std::error_code& e) {
        if (e == std::errc::timed_out) {
            p->err = errc::deadline_exceeded;
            skip_rest = true;
        } else {
            p->err = errc::connection_closed;
            ok = false;
        }
    };
    if (h.service != a.service || h.method != a.method) {
        p->err = errc::malformed_frame; // a response to another method: the peer is confused
        ok = false;
    } else if (h.schema != 0) {
        p->err = wire::error_of_status(h.schema);
        skip_rest = true;
    } else if (h.length < a.resp_fixed) {
        p->err = errc::malformed_frame;
        ok = false;
    } else if (auto fixed = rd.take(a.resp_fixed, p->until); !fixed) {
        read_failed(fixed.error());
    } else {
        rx_list targets;
        std::error_code e = a.decode(a.resp, *fixed, h.length - a.resp_fixed, targets);
        if (e == errc::malformed_frame) {
            p->err = e;
            ok = false;
        } else if (e) {
            p->err = e;
            skip_rest = true;
        } else if (auto r = rd.fill(targets, p->until); !r) {
            read_failed(r.error());
        }
    }
    p->done.signal();
    if (ok && skip_rest) ok = rd.skip(rd.frame_left()).has_value();
    return ok;
}

namespace {
void request_written(out_frame* f, bool ok) {
    if (ok) return;
    auto* p = reinterpret_cast<pending*>(reinterpret_cast<uint8_t*>(f) - offsetof(pending, out));
    if (!p->in_table) return;
    p->conn->remove(*p);
    p->err = errc::connection_closed;
    p->done.signal();
}
} // namespace

result<void> call(client_conn& c, const call_args& a, duration timeout) {
    // The vCPU first: nothing else of the connection may be read from another thread.
    if (gluon::detail::current_vcpu() != c.home) return errno_error(EXDEV);
    if (c.closed) return unexpected(make_error_code(errc::connection_closed));
    if (timeout == forever) timeout = c.o.default_timeout;
    pending p;
    p.conn = &c;
    p.a = &a;
    size_t head_len = wire::k_header_size + a.req_fixed;
    uint8_t* head = p.head;
    if (head_len > k_inline_head) {
        p.heap_head.reset(new uint8_t[head_len]);
        head = p.heap_head.get();
    }
    p.out.iov.push(head, head_len);
    size_t len = a.req_fixed + a.encode(a.req, head + wire::k_header_size, p.out.iov);
    if (len > UINT32_MAX) return unexpected(make_error_code(errc::frame_too_large));
    deadline_t dl = timeout_deadline(timeout);
    p.until = dl; // the reader gives p's memory back by then, however slow the server
    wire::header h;
    h.length = static_cast<uint32_t>(len);
    h.service = a.service;
    h.method = a.method;
    h.schema = a.schema;
    h.id = c.add(p);
    if (timeout != forever) {
        int64_t us = (timeout.count() + 999) / 1000;
        h.timeout_us = us > 0 ? uint64_t(us) : 1;
    }
    wire::put(h, head);
    p.out.done = request_written;
    c.wr.push(p.out);
    long r = p.done.wait_until(dl, true);
    if (r != 0) {
        std::error_code why = r == -ETIMEDOUT ? make_error_code(errc::deadline_exceeded)
                                              : make_error_code(errc::cancelled);
        if (p.in_table) {
            // No response has started: forget the call, and tell the server if it has it.
            c.remove(p);
            if (!c.wr.unqueue(p.out)) {
                // Being written maybe, to a server that is not reading: not to be waited for.
                c.wr.release(p.out);
                if (!c.closed) c.send_cancel(p.id);
            }
            return unexpected(why);
        }
        // The reader is filling the response into place: let it finish with it (by the
        // deadline: it stops reading into p then).
        p.done.wait();
        if (r == -ECANCELED) restore_interrupt();
    }
    // A response can overtake the end of the write that carried its request (a later frame of
    // the same batch still being written): the frame must be done with before p goes.
    // (A response to a request still queued can only come from a confused server: drop it.)
    if (!c.wr.unqueue(p.out)) c.wr.wait_not_writing(p.out);
    if (p.err) return unexpected(p.err);
    return {};
}

} // namespace detail

client::~client() = default;

result<client> client::open(std::unique_ptr<net::byte_stream> s, const client_options& o) {
    if (!s) return errno_error(EINVAL);
    if (!is_vcpu()) return errno_error(EPERM);
    client c;
    c.c_ = std::make_shared<detail::client_conn>(std::move(s), o);
    detail::client_conn* cc = c.c_.get();
    cc->home = gluon::detail::current_vcpu();
    cc->wr.on_broken(
        [](void* p) { (void)static_cast<detail::client_conn*>(p)->reader.interrupt(); }, cc);
    GLUON_TRY(cc->wr.start());
    cc->reader = GLUON_TRY(spawn(fiber_options{.name = "rpc-reader"}, [cc] { cc->read_loop(); }));
    return c;
}

result<client> client::connect(const net::address& addr, const client_options& o,
                               duration timeout) {
    auto s = GLUON_TRY(net::stream::connect(addr, timeout));
    if (addr.family() != AF_UNIX) (void)s.set_nodelay(true);
    return open(std::make_unique<net::stream>(std::move(s)), o);
}

result<void> client::ping(duration timeout) {
    empty req, resp;
    return call(builtin::ping, req, resp, {.timeout = timeout});
}

result<std::vector<method_info>> client::describe(duration timeout) {
    empty req;
    builtin::name_table t;
    GLUON_TRY(call(builtin::methods, req, t, {.timeout = timeout}));
    std::vector<method_info> out;
    std::string_view rest = t.text;
    while (!rest.empty()) {
        size_t nl = rest.find('\n');
        if (nl == std::string_view::npos) return errno_error(EPROTO);
        std::string_view row = rest.substr(0, nl);
        rest.remove_prefix(nl + 1);
        std::string_view cols[5];
        for (int i = 0; i < 5; ++i) {
            size_t tab = i < 4 ? row.find('\t') : row.size();
            if (tab == std::string_view::npos) return errno_error(EPROTO);
            cols[i] = row.substr(0, tab);
            row.remove_prefix(i < 4 ? tab + 1 : tab);
        }
        method_info m;
        m.service = static_cast<uint16_t>(std::strtoul(std::string(cols[0]).c_str(), nullptr, 10));
        m.id = static_cast<uint16_t>(std::strtoul(std::string(cols[1]).c_str(), nullptr, 10));
        m.schema = static_cast<uint32_t>(std::strtoul(std::string(cols[2]).c_str(), nullptr, 16));
        m.service_name = cols[3];
        m.name = cols[4];
        out.push_back(std::move(m));
    }
    return out;
}

bool client::healthy() const noexcept {
    return c_ && !c_->closed && !c_->wr.broken();
}

size_t client::in_flight() const noexcept {
    return c_ ? c_->in_flight : 0;
}

client::counters client::stats() const noexcept {
    if (!c_) return {};
    return {c_->wr.frames(), c_->wr.writes()};
}

result<void> client::close() {
    if (!c_) return errno_error(EINVAL);
    c_->shut(); // the reader, ending, has closed the stream
    return c_->stream_closed;
}

} // namespace gluon::rpc
