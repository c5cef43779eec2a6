// The native RPC server: one reader fiber per connection (serve's own), a fiber per call, the
// connection's writer fiber, and a watchdog fiber for deadlines, started by the first call that
// has one.
#include "gluon/rpc/native/server.h"

#include "conn.h"
#include "gluon/common/log.h"
#include "wire.h"

#include <algorithm>
#include <cstdio>
#include <new>

namespace gluon::rpc {
namespace detail {

namespace {
constexpr size_t round16(size_t n) {
    return (n + 15) & ~size_t(15);
}
constexpr int64_t k_idle_watch_ns = 1'000'000'000;

// A frame with no payload (an error response), freed once written.
struct small_frame : out_frame {
    server_conn* conn;
    uint8_t head[wire::k_header_size];
};
} // namespace

struct server_call {
    list_hook hook; // server_conn::calls_
    out_frame out;
    server_conn* conn;
    const method_entry* m;
    call_body* body;
    uint8_t* head; // header + the response's fixed part
    fiber f;
    call_context ctx;
    bool expired = false;

    static server_call* make(server_conn* c, const method_entry* m) {
        size_t size = round16(sizeof(server_call)) + round16(m->body_size) + wire::k_header_size +
                      m->resp_fixed;
        auto* mem = static_cast<uint8_t*>(::operator new(size, std::align_val_t(16)));
        auto* call = new (mem) server_call;
        call->conn = c;
        call->m = m;
        call->body = m->construct(mem + round16(sizeof(server_call)));
        call->head = mem + round16(sizeof(server_call)) + round16(m->body_size);
        return call;
    }
    static void destroy(server_call* c) noexcept {
        c->body->~call_body();
        c->~server_call();
        ::operator delete(static_cast<void*>(c), std::align_val_t(16));
    }
    static void written(out_frame* f, bool);
};

struct server_conn {
    server& srv;
    const server_options& o;
    frame_reader rd;
    frame_writer wr;
    intrusive_list<server_call, &server_call::hook> calls;
    size_t in_flight = 0;
    size_t unwritten = 0; // answers queued to the writer or being written
    bool reader_waits = false;
    bool closing = false;
    event drained;
    event room; // set when unwritten drops below the limit while the reader waits
    fiber watchdog;
    deadline_t watch_target = k_no_deadline;
    uint64_t calls_unflushed = 0; // added to the server's shared count now and then

    void flush_calls() noexcept {
        srv.stats_.calls.fetch_add(calls_unflushed, std::memory_order_relaxed);
        calls_unflushed = 0;
    }

    server_conn(server& s, net::byte_stream& st)
        : srv(s), o(s.opts_), rd(st, s.opts_.read_buffer_bytes), wr(st) {
        rd.set_frame_timeout(o.frame_timeout);
    }

    result<void> run();
    size_t answer_limit() const noexcept { return std::max<size_t>(o.max_in_flight, 1); }
    result<void> wait_for_room();
    void queue_answer(out_frame& f);
    void answer_written() noexcept;
    result<void> on_request(const wire::header& h);
    void on_cancel(uint64_t id);
    void reply_error(const wire::header& h, std::error_code e);
    void finish(server_call* c, std::error_code e);
    void watch();
    void close();
};

void server_call::written(out_frame* f, bool) {
    auto* c =
        reinterpret_cast<server_call*>(reinterpret_cast<uint8_t*>(f) - offsetof(server_call, out));
    server_conn* conn = c->conn;
    destroy(c);
    conn->answer_written();
}

namespace {
void free_small(out_frame* f, bool) {
    auto* s = static_cast<small_frame*>(f);
    server_conn* conn = s->conn;
    delete s;
    conn->answer_written();
}
} // namespace

// Answers wait for the writer as long as the client does not read them, each holding its
// call's memory: a client that sends requests and reads nothing would grow that queue without
// bound. So the reader stops taking requests while max_in_flight answers wait; a client that
// reads its answers as they come never gets near that.
result<void> server_conn::wait_for_room() {
    if (unwritten < answer_limit()) return {};
    srv.stats_.throttled.fetch_add(1, std::memory_order_relaxed);
    while (unwritten >= answer_limit()) {
        room.reset();
        reader_waits = true;
        auto r = room.wait(); // ECANCELED: serve's fiber was interrupted
        reader_waits = false;
        if (!r) return r;
    }
    return {};
}

void server_conn::queue_answer(out_frame& f) {
    ++unwritten;
    wr.push(f); // a broken writer calls done, and so answer_written, before this returns
}

void server_conn::answer_written() noexcept {
    --unwritten;
    if (reader_waits && unwritten < answer_limit()) room.set();
}

void server_conn::reply_error(const wire::header& req, std::error_code e) {
    srv.stats_.refused.fetch_add(1, std::memory_order_relaxed);
    auto* f = new small_frame;
    f->conn = this;
    wire::header h;
    h.type = wire::kind::response;
    h.id = req.id;
    h.service = req.service;
    h.method = req.method;
    h.schema = wire::status_of(e);
    wire::put(h, f->head);
    f->iov.push(f->head, sizeof f->head);
    f->done = free_small;
    queue_answer(*f);
}

result<void> server_conn::run() {
    GLUON_TRY(wr.start());
    result<void> end;
    for (;;) {
        if (auto r = wait_for_room(); !r) {
            end = r;
            break;
        }
        auto h = rd.next_header();
        if (!h) {
            if (h.error() != std::errc::no_message_available) end = unexpected(h.error());
            break;
        }
        if (auto e = wire::check(*h, o.max_frame_bytes)) {
            if (e == errc::frame_too_large && h->type == wire::kind::request) {
                reply_error(*h, e);
                if (auto s = rd.skip(h->length); !s) {
                    end = s;
                    break;
                }
                continue;
            }
            end = unexpected(e);
            break;
        }
        if (h->type == wire::kind::cancel) {
            on_cancel(h->id);
            continue;
        }
        if (h->type != wire::kind::request) {
            end = unexpected(make_error_code(errc::malformed_frame));
            break;
        }
        if (auto r = on_request(*h); !r) {
            end = r;
            break;
        }
    }
    if (!end && end.error() == errc::malformed_frame)
        srv.stats_.malformed.fetch_add(1, std::memory_order_relaxed);
    close();
    return end;
}

result<void> server_conn::on_request(const wire::header& h) {
    bool service_known = false;
    const method_entry* m = srv.find(h.service, h.method, service_known);
    std::error_code refuse;
    if (!m) {
        refuse = service_known ? errc::unknown_method : errc::unknown_service;
    } else if (h.schema != m->schema) {
        refuse = errc::schema_mismatch;
    } else if (in_flight >= o.max_in_flight) {
        refuse = errc::too_many_requests;
    } else if (h.length < m->req_fixed) {
        return unexpected(make_error_code(errc::malformed_frame));
    }
    if (refuse) {
        reply_error(h, refuse);
        return rd.skip(h.length);
    }
    server_call* c = server_call::make(this, m);
    rx_list targets;
    auto fixed = rd.take(m->req_fixed);
    if (!fixed) {
        server_call::destroy(c);
        return unexpected(fixed.error());
    }
    if (auto e = c->body->decode(*fixed, h.length - m->req_fixed, targets)) {
        server_call::destroy(c);
        if (e == errc::malformed_frame) return unexpected(e);
        reply_error(h, e);
        return rd.skip(h.length - m->req_fixed);
    }
    if (auto r = rd.fill(targets); !r) {
        server_call::destroy(c);
        return r;
    }
    c->ctx.id_ = h.id;
    if (h.timeout_us != 0) {
        int64_t ns =
            h.timeout_us > uint64_t(INT64_MAX / 1000) ? INT64_MAX : int64_t(h.timeout_us * 1000);
        c->ctx.deadline_ = deadline_after(duration(ns));
    }
    calls.push_back(*c);
    ++in_flight;
    if (++calls_unflushed == 64) flush_calls();
    auto f = spawn(fiber_options{.stack_size = o.handler_stack_bytes, .name = "rpc-call"}, [c] {
        std::error_code e = c->body->invoke(c->ctx);
        c->conn->finish(c, e);
    });
    if (!f) {
        calls.erase(*c);
        --in_flight;
        server_call::destroy(c);
        reply_error(h, f.error());
        return {};
    }
    c->f = std::move(*f);
    if (c->ctx.deadline_ < watch_target) {
        watch_target = c->ctx.deadline_;
        if (watchdog.joinable()) {
            (void)watchdog.interrupt();
        } else if (auto w = spawn(fiber_options{.name = "rpc-deadlines"}, [this] { watch(); })) {
            watchdog = std::move(*w);
        }
    }
    return {};
}

void server_conn::on_cancel(uint64_t id) {
    calls.for_each([&](server_call& c) {
        if (c.ctx.id_ == id && !c.ctx.cancelled_) {
            c.ctx.cancelled_ = true;
            srv.stats_.cancelled.fetch_add(1, std::memory_order_relaxed);
            (void)c.f.interrupt();
        }
    });
}

void server_conn::finish(server_call* c, std::error_code e) {
    calls.erase(*c);
    --in_flight;
    if (closing || (c->ctx.cancelled_ && !c->expired)) {
        // Nobody waits for the answer (the client cancelled, or the connection is going).
        server_call::destroy(c);
        if (closing && in_flight == 0) drained.set();
        return;
    }
    // The watchdog marks calls whose deadline passed; one that finished just after its
    // deadline but before the watchdog looked is answered (the client enforces its deadline
    // too), which saves a clock read per call.
    if (c->expired) e = errc::deadline_exceeded;
    wire::header h;
    h.type = wire::kind::response;
    h.id = c->ctx.id_;
    h.service = c->m->service;
    h.method = c->m->id;
    c->out.iov.clear();
    c->out.iov.push(c->head, wire::k_header_size);
    if (!e) {
        size_t var = c->body->encode(c->head + wire::k_header_size, c->out.iov);
        c->out.iov[0].iov_len += c->m->resp_fixed;
        size_t len = c->m->resp_fixed + var;
        if (len > UINT32_MAX) {
            e = errc::frame_too_large;
        } else {
            h.length = static_cast<uint32_t>(len);
        }
    }
    if (e) {
        c->out.iov.clear();
        c->out.iov.push(c->head, wire::k_header_size);
        h.length = 0;
        h.schema = wire::status_of(e);
    }
    wire::put(h, c->head);
    c->out.done = server_call::written;
    queue_answer(c->out);
}

void server_conn::watch() {
    while (!closing) {
        deadline_t now = mono_now_ns(), next = k_no_deadline;
        calls.for_each([&](server_call& c) {
            if (c.expired) return;
            if (c.ctx.deadline_ <= now) {
                c.expired = true;
                c.ctx.cancelled_ = true;
                srv.stats_.expired.fetch_add(1, std::memory_order_relaxed);
                (void)c.f.interrupt();
            } else if (c.ctx.deadline_ < next) {
                next = c.ctx.deadline_;
            }
        });
        // With nothing to watch, look again in a while rather than never: a call whose
        // deadline is later than that then starts no wake-up of its own (with one call at a
        // time per connection, every call would).
        if (next == k_no_deadline) next = now + k_idle_watch_ns;
        watch_target = next;
        (void)this_fiber::sleep_until(next); // ECANCELED: an earlier deadline came, or close()
    }
}

void server_conn::close() {
    closing = true;
    calls.for_each([](server_call& c) { (void)c.f.interrupt(); });
    bool interrupted = false;
    while (in_flight > 0) {
        drained.reset();
        if (in_flight > 0 && !drained.wait()) interrupted = true;
    }
    if (watchdog.joinable()) {
        (void)watchdog.interrupt();
        join_fully(watchdog);
    }
    wr.stop();
    flush_calls();
    if (interrupted) restore_interrupt();
}

} // namespace detail

server::server(server_options o) : opts_(o) {
    service_names_.resize(1);
    service_names_[0] = "rpc";
    auto ping = [](call_context&, const empty&, empty&) -> result<void> { return {}; };
    auto names = [this](call_context&, const empty&, builtin::name_table& out) -> result<void> {
        for (const method_info& i : methods()) {
            char row[64];
            std::snprintf(row, sizeof row, "%u\t%u\t%08x\t", unsigned(i.service), unsigned(i.id),
                          unsigned(i.schema));
            out.text += row;
            out.text += i.service_name + "\t" + i.name + "\n";
        }
        return {};
    };
    (void)add_entry(make_entry(builtin::ping, std::move(ping)));
    (void)add_entry(make_entry(builtin::methods, std::move(names)));
}

server::~server() = default;

result<void> server::add_service(uint16_t id, std::string name) {
    if (id == 0) return errno_error(EINVAL);
    if (service_names_.size() <= id) service_names_.resize(size_t(id) + 1);
    if (!service_names_[id].empty()) return errno_error(EEXIST);
    service_names_[id] = std::move(name);
    return {};
}

result<void> server::add_entry(std::unique_ptr<detail::method_entry> e) {
    if (table_.size() <= e->service) table_.resize(size_t(e->service) + 1);
    auto& svc = table_[e->service];
    if (svc.size() <= e->id) svc.resize(size_t(e->id) + 1);
    if (svc[e->id]) return errno_error(EEXIST);
    svc[e->id] = std::move(e);
    return {};
}

const detail::method_entry* server::find(uint16_t service, uint16_t id,
                                         bool& service_known) const noexcept {
    service_known = (service < table_.size() && !table_[service].empty()) ||
                    (service < service_names_.size() && !service_names_[service].empty());
    if (service >= table_.size()) return nullptr;
    const auto& svc = table_[service];
    return id < svc.size() ? svc[id].get() : nullptr;
}

std::vector<method_info> server::methods() const {
    std::vector<method_info> out;
    for (const auto& svc : table_) {
        for (const auto& m : svc) {
            if (!m) continue;
            method_info i;
            i.service = m->service;
            i.id = m->id;
            i.schema = m->schema;
            if (m->service < service_names_.size()) i.service_name = service_names_[m->service];
            i.name = m->name;
            out.push_back(std::move(i));
        }
    }
    return out;
}

server::counters server::stats() const noexcept {
    auto get = [](const std::atomic<uint64_t>& a) { return a.load(std::memory_order_relaxed); };
    return {get(stats_.calls),   get(stats_.refused),   get(stats_.cancelled),
            get(stats_.expired), get(stats_.malformed), get(stats_.throttled)};
}

result<void> server::serve(net::byte_stream& s) {
    detail::server_conn c(*this, s);
    return c.run();
}

} // namespace gluon::rpc
