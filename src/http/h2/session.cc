#include "session.h"

#include <sys/socket.h>

#include <algorithm>
#include <new>

#include "gluon/common/lazy.h"
#include "gluon/common/log.h"
#include "gluon/net/socket.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sys/ops.h"

namespace gluon::http::detail {

namespace {

constexpr size_t k_send_batch = 64 * 1024;  // frames gathered before a send
constexpr size_t k_idle_workers = 16;        // handler fibers kept waiting for streams

// t + d in mono_now_ns terms, saturating (d == forever, or past INT64_MAX: never).
int64_t sat_add(int64_t t, duration d) noexcept {
    const int64_t ns = d.count() < 0 ? 0 : d.count();
    return t > INT64_MAX - ns ? INT64_MAX : t + ns;
}
constexpr duration k_worker_linger = std::chrono::seconds(2);  // how long more than those wait
constexpr size_t k_spare_streams = 32;       // finished stream objects kept for reuse

h2_session& session_of(void* u) { return *static_cast<h2_session*>(u); }

bool request_headers(const nghttp2_frame* f) {
    return f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST;
}

int on_begin_headers(nghttp2_session*, const nghttp2_frame* f, void* u) {
    return request_headers(f) ? session_of(u).begin_headers(f->hd.stream_id) : 0;
}

int on_header(nghttp2_session*, const nghttp2_frame* f, const uint8_t* name, size_t namelen, const uint8_t* value,
              size_t valuelen, uint8_t, void* u) {
    if (!request_headers(f)) return 0;  // trailers are not kept
    return session_of(u).on_header(f->hd.stream_id, {reinterpret_cast<const char*>(name), namelen},
                                   {reinterpret_cast<const char*>(value), valuelen});
}

int on_frame_recv(nghttp2_session*, const nghttp2_frame* f, void* u) { return session_of(u).on_frame(*f); }

int on_data_chunk(nghttp2_session* ng, uint8_t, int32_t id, const uint8_t* data, size_t len, void*) {
    auto* st = static_cast<h2_stream*>(nghttp2_session_get_stream_user_data(ng, id));
    if (st) st->on_data(data, len);
    else nghttp2_session_consume(ng, id, len);
    return 0;
}

int on_stream_close(nghttp2_session*, int32_t id, uint32_t ec, void* u) {
    return session_of(u).on_stream_close(id, ec);
}

long on_send(nghttp2_session*, const uint8_t* data, size_t len, int, void* u) {
    return session_of(u).on_send(data, len);
}

int on_send_data(nghttp2_session*, nghttp2_frame* f, const uint8_t* framehd, size_t len, nghttp2_data_source* src,
                 void* u) {
    return session_of(u).on_send_data(*f, framehd, len, *static_cast<h2_stream*>(src->ptr));
}

struct setup {
    nghttp2_session_callbacks* cbs = nullptr;
    nghttp2_option* opt = nullptr;
    setup() {
        if (nghttp2_session_callbacks_new(&cbs) != 0 || nghttp2_option_new(&opt) != 0) throw std::bad_alloc();
        nghttp2_session_callbacks_set_on_begin_headers_callback(cbs, on_begin_headers);
        nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
        nghttp2_session_callbacks_set_send_callback(cbs, on_send);
        nghttp2_session_callbacks_set_send_data_callback(cbs, on_send_data);
        // Request bodies are buffered until the handler reads them: the window opens as it does.
        nghttp2_option_set_no_auto_window_update(opt, 1);
        // Hostile peers (RFC 9113 10.5): SETTINGS floods, rapid reset storms, CONTINUATION floods.
        nghttp2_option_set_max_settings(opt, 32);
        nghttp2_option_set_stream_reset_rate_limit(opt, 1000, 33);
        nghttp2_option_set_max_continuations(opt, 8);
    }
    ~setup() {  // only the copy that lost a race to be made first is destroyed
        nghttp2_session_callbacks_del(cbs);
        nghttp2_option_del(opt);
    }
};

constinit lazy_ptr<setup> g_setup;  // not a function-local static: common/lazy.h says why

const setup& nghttp2_setup() {
    return g_setup.get([] { return new setup; });
}

}  // namespace

h2_session::h2_session(net::byte_stream& s, const handler& h, const server_options& opts, const bool* stopping,
                       bool* idle, char* buf, size_t cap)
    : s_(s), h_(h), opts_(opts), stopping_(stopping), idle_(idle), buf_(buf), cap_(cap),
      data_sent_at_(mono_coarse_ns()) {
    const setup& su = nghttp2_setup();
    if (nghttp2_session_server_new2(&ng_, su.cbs, this, su.opt) != 0) throw std::bad_alloc();
}

h2_session::~h2_session() {
    nghttp2_session_del(ng_);  // calls no callback
    while (h2_stream* st = streams_.pop_front()) {
        st->release_body();  // a body still sending: its file is closed
        delete st;
    }
    while (h2_stream* st = spare_.pop_front()) delete st;
}

void h2_session::free_stream(h2_stream& st) noexcept {
    streams_.erase(st);
    // Request body bytes no handler read (the stream was reset while they waited) still count
    // against the connection's window: give it back, or each such body shrinks the window for
    // good until no request body can arrive on the connection.
    if (size_t unread = st.in.size() - st.in_pos; unread && !gone_) {
        nghttp2_session_consume_connection(ng_, unread);
        st.in.clear();
        st.in_pos = 0;
        want_write();
    }
    // A body cut off by a reset was never released by its last DATA frame: its file would stay
    // open (until the object's reuse, or for good once the object is deleted).
    st.release_body();
    if (spare_count_ < k_spare_streams) {
        spare_.push_back(st);
        ++spare_count_;
    } else {
        delete &st;
    }
    // A graceful stop waits for the last stream, then wakes the reader to say goodbye.
    if (stopping_ && *stopping_ && streams_.empty() && !gone_)
        if (net::socket_fd* sock = s_.socket()) (void)sys::shutdown(sock->get(), SHUT_RD);
}

void h2_session::handler_finished(h2_stream& st) noexcept {
    st.handler_done = true;
    // Freed once nghttp2 is done with it too (it may still be sending the body); streams still
    // open when the connection ends are freed with the session.
    if (st.closed) free_stream(st);
    else if (!st.in_done) drop_request_rest(st);
}

// The handler returned, but the client has not ended its request: nothing will read the rest,
// and the stream would stay open (with its object, and the connection never idle) until the
// client ended it, which it need not do. Once the whole answer has gone, RFC 9113 8.1
// lets the server ask it to stop sending (RST_STREAM NO_ERROR, after which the client keeps the
// response), but clients still uploading take that for an error (curl 7.88 fails the transfer
// with "stream error"), so the stream lingers: the rest of the body is read and dropped, and
// a client that sends none of it for body_timeout, or is still sending it body_total_timeout
// after the handler returned, is reset (check_lingering; the reader looks at least every
// until_next_check's cap, as nothing wakes it for a stream that starts lingering).
void h2_session::drop_request_rest(h2_stream& st) noexcept {
    if (st.in_done || st.closed || gone_) return;
    st.lingering_since = mono_now_ns();
    st.linger_end = sat_add(st.lingering_since, opts_.body_total_timeout);
    const int64_t due = std::min(sat_add(st.lingering_since, opts_.body_timeout), st.linger_end);
    if (due < next_linger_check_) next_linger_check_ = due;
}

// Resets the lingering streams that are due (drop_request_rest).
void h2_session::check_lingering(int64_t now) noexcept {
    if (now < next_linger_check_) return;
    int64_t next = INT64_MAX;
    streams_.for_each([&](h2_stream& st) {
        if (!st.lingering_since || st.in_done || st.closed) return;
        const int64_t due = std::min(sat_add(st.lingering_since, opts_.body_timeout), st.linger_end);
        if (due > now) {
            if (due < next) next = due;
            return;
        }
        if (nghttp2_session_get_stream_local_close(ng_, st.id) != 1) {  // the answer is still going
            st.lingering_since = now;  // (a window that stays closed is check_stalls' to end)
            const int64_t again = sat_add(now, opts_.body_timeout);
            if (again < next) next = again;
            return;
        }
        st.lingering_since = 0;
        nghttp2_submit_rst_stream(ng_, NGHTTP2_FLAG_NONE, st.id, NGHTTP2_NO_ERROR);
        want_write();
    });
    next_linger_check_ = next;
}

void h2_session::work(worker* w) {
    for (;;) {
        if (pending_.empty()) {
            if (gone_) break;
            // Past the first k_idle_workers a worker lingers for the next burst rather than
            // exit at once: a connection that keeps many streams in flight keeps its workers
            // (a fiber exit and spawn per stream cost a stack's release and refault).
            bool extra = idle_workers_ >= k_idle_workers;
            ++idle_workers_;
            auto got = work_.acquire(extra ? k_worker_linger : forever);
            --idle_workers_;
            if (!got && extra && pending_.empty()) break;
            continue;
        }
        h2_stream* st = pending_.front();
        pending_.pop_front();
        st->handler_fiber = &w->f;  // for interrupt_when_abandoned
        if (!st->closed && !gone_) st->serve();  // a stream reset while queued is not served
        st->handler_fiber = nullptr;
        handler_finished(*st);
    }
    workers_.erase(*w);
    delete w;
    if (--worker_count_ == 0) workers_done_.set();
}

int h2_session::begin_headers(int32_t id) {
    h2_stream* st = spare_.pop_front();
    if (st) {
        --spare_count_;
        st->reuse(id);
    } else if (!(st = new (std::nothrow) h2_stream(*this, id))) {
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    streams_.push_back(*st);
    nghttp2_session_set_stream_user_data(ng_, id, st);
    st->head_until = sat_add(mono_coarse_ns(), opts_.header_timeout);
    if (st->head_until < next_head_check_) next_head_check_ = st->head_until;
    return 0;
}

int h2_session::on_header(int32_t id, std::string_view name, std::string_view value) {
    auto* st = static_cast<h2_stream*>(nghttp2_session_get_stream_user_data(ng_, id));
    if (!st || st->refuse) return 0;
    st->head_bytes += name.size() + value.size() + 32;  // RFC 9113 6.5.2's measure
    if (st->head_bytes > opts_.limits.max_head_bytes || st->refs.size() >= opts_.limits.max_headers) {
        st->refuse = 431;
        std::string().swap(st->hbuf);
        decltype(st->refs)().swap(st->refs);
        return 0;
    }
    auto at = static_cast<uint32_t>(st->hbuf.size());
    st->hbuf.append(name);
    st->hbuf.append(value);
    st->refs.push_back({at, static_cast<uint32_t>(name.size()), at + static_cast<uint32_t>(name.size()),
                        static_cast<uint32_t>(value.size())});
    return 0;
}

int h2_session::on_frame(const nghttp2_frame& f) {
    if (f.hd.type != NGHTTP2_HEADERS && f.hd.type != NGHTTP2_DATA) return 0;
    auto* st = static_cast<h2_stream*>(nghttp2_session_get_stream_user_data(ng_, f.hd.stream_id));
    if (!st) return 0;
    if (f.hd.type == NGHTTP2_HEADERS && f.headers.cat == NGHTTP2_HCAT_REQUEST) {
        st->head_until = 0;
        ready_.push_back(f.hd.stream_id);
    }
    if (f.hd.flags & NGHTTP2_FLAG_END_STREAM) {
        st->in_done = true;
        st->wake(st->in_ready);
    }
    return 0;
}

int h2_session::on_stream_close(int32_t id, uint32_t error_code) {
    auto* st = static_cast<h2_stream*>(nghttp2_session_get_stream_user_data(ng_, id));
    if (!st) return 0;
    st->on_close(error_code);
    if (!st->handler_started || st->handler_done) free_stream(*st);
    return 0;
}

void h2_session::drop_reset_pending() noexcept {
    for (auto it = pending_.begin(); it != pending_.end();) {
        h2_stream* st = *it;
        if (!st->closed) {
            ++it;
            continue;
        }
        it = pending_.erase(it);
        handler_finished(*st);  // never served: freed now
    }
}

void h2_session::start_handlers() {
    for (int32_t id : ready_) {
        auto* st = static_cast<h2_stream*>(nghttp2_session_get_stream_user_data(ng_, id));
        if (!st || st->closed) continue;  // reset in the same input
        st->handler_started = true;
        pending_.push_back(st);
    }
    ready_.clear();
    // At most h2_max_concurrent_streams handlers run (CVE-2023-44487): nghttp2 stops counting a
    // stream the client resets, but its handler runs on, so opening and resetting streams would
    // start handlers without bound. Streams past that wait for a worker; those open are bounded
    // by nghttp2's limit, and those reset while waiting are dropped once the queue is longer.
    const size_t max_workers = opts_.h2_max_concurrent_streams ? opts_.h2_max_concurrent_streams : 1;
    if (pending_.size() > max_workers) drop_reset_pending();
    // Workers for the streams the idle ones cannot take.
    while (pending_.size() > idle_workers_ + spawning_ && worker_count_ < max_workers) {
        auto* w = new (std::nothrow) worker;
        auto f = w ? spawn([this, w] { work(w); }) : result<fiber>(errno_error(ENOMEM));
        if (!f) {
            delete w;
            if (worker_count_) break;  // the running workers will get to them
            // No worker at all: refuse what waits.
            for (h2_stream* st : pending_) {
                st->handler_started = false;
                nghttp2_submit_rst_stream(ng_, NGHTTP2_FLAG_NONE, st->id, NGHTTP2_REFUSED_STREAM);
            }
            pending_.clear();
            break;
        }
        w->f = std::move(*f);
        workers_.push_back(*w);
        ++worker_count_;
        ++spawning_;
    }
    spawning_ = 0;
    if (size_t wake = pending_.size() < idle_workers_ ? pending_.size() : idle_workers_)
        work_.release(static_cast<int64_t>(wake));
}

// GOAWAY (NO_ERROR) names the last stream the client opened, and nghttp2 ignores those it opens
// after: the client knows they were not served and may send them again elsewhere (RFC 9113
// 6.8), while the open ones finish and the connection ends with the last. Without it a stop
// let a busy connection's client go on opening streams, each served, until the grace ran out
// and cut those in flight.
void h2_session::refuse_new_streams() noexcept {
    if (goaway_sent_ || gone_) return;
    goaway_sent_ = true;
    nghttp2_submit_goaway(ng_, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(ng_), NGHTTP2_NO_ERROR,
                          nullptr, 0);
    want_write();
}

bool h2_session::feed(const char* p, size_t n) {
    auto rv = nghttp2_session_mem_recv(ng_, reinterpret_cast<const uint8_t*>(p), n);
    if (rv < 0) {
        GLUON_LOG_RATE_LIMITED(debug, std::chrono::seconds(1), "gluon: http2: {}", nghttp2_strerror(static_cast<int>(rv)));
        ready_.clear();
        // Say why before closing (nghttp2 queues a GOAWAY itself for some errors, not these).
        bool calm = rv == NGHTTP2_ERR_FLOODED || rv == NGHTTP2_ERR_TOO_MANY_CONTINUATIONS;
        nghttp2_session_terminate_session(ng_, calm ? NGHTTP2_ENHANCE_YOUR_CALM : NGHTTP2_PROTOCOL_ERROR);
        want_write();
        return false;
    }
    start_handlers();
    if (nghttp2_session_want_write(ng_)) want_write();
    return true;
}

void h2_session::run(std::string_view preread) {
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, opts_.h2_max_concurrent_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, opts_.h2_stream_window},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<uint32_t>(opts_.limits.max_head_bytes)},
        // RFC 9218: no RFC 7540 priority tree, so nghttp2 keeps no closed streams for it.
        {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},
    };
    nghttp2_submit_settings(ng_, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]);
    if (opts_.h2_connection_window > 65535)
        nghttp2_session_set_local_window_size(ng_, NGHTTP2_FLAG_NONE, 0, static_cast<int32_t>(opts_.h2_connection_window));
    auto w = spawn([this] { writer(); });
    if (!w) return;
    (void)w->detach();
    want_write();

    bool ok = preread.empty() || feed(preread.data(), preread.size());
    // Only streams make a connection busy: idle_timeout runs from when the last one ended, and
    // what comes meanwhile without opening one (PINGs, SETTINGS, window updates) does not start
    // it again. A PING a little more often than idle_timeout kept an idle connection for good.
    deadline_t idle_until = k_no_deadline;
    bool interrupted = false;  // the read was: the server's grace ran out
    while (ok && !gone_ && (nghttp2_session_want_read(ng_) || nghttp2_session_want_write(ng_))) {
        bool idle = streams_.empty();
        if (stopping_ && *stopping_) {
            if (idle) {
                nghttp2_session_terminate_session(ng_, NGHTTP2_NO_ERROR);
                want_write();
                break;
            }
            refuse_new_streams();  // (a server's stop says so at once; serve_connection's caller may not)
        }
        if (!idle) idle_until = k_no_deadline;
        else if (idle_until == k_no_deadline) idle_until = timeout_deadline(opts_.idle_timeout);
        const int64_t now = idle ? 0 : mono_now_ns();  // one clock read for the check and the wait
        if (!idle && (!check_stalls(now) || !check_heads(now))) break;
        if (!idle) check_lingering(now);
        *idle_ = idle;
        auto n = s_.read_some(buf_, cap_, idle ? timeout_left(idle_until) : until_next_check(now));
        *idle_ = false;
        if (!n && !idle && n.error() == std::errc::timed_out) continue;  // time for check_stalls
        if (!n && n.error() == std::errc::operation_canceled) interrupted = true;
        if (!n || *n == 0) break;
        ok = feed(buf_, *n);
    }
    if (stopping_ && *stopping_) nghttp2_session_terminate_session(ng_, NGHTTP2_NO_ERROR);
    // The connection ends: waits still pending in handlers fail, and they finish.
    gone_ = true;
    streams_.for_each([](h2_stream& st) {
        st.wake(st.in_ready);
        st.wake(st.out_room);
        st.interrupt_handler();
    });
    // Workers hold the session: it outlives them. If this fiber is interrupted (the server's
    // grace ran out), so are they, whether the interrupt came now or ended the read above (an
    // interrupt ends one call: that read took it, and handlers ran on past the grace).
    if (idle_workers_) work_.release(static_cast<int64_t>(idle_workers_));
    auto interrupt_workers = [this] { workers_.for_each([](worker& w) { (void)w.f.interrupt(); }); };
    if (interrupted) interrupt_workers();
    while (worker_count_) {
        workers_done_.reset();
        if (!workers_done_.wait() && !interrupted) {
            interrupted = true;
            interrupt_workers();
        }
    }
    // The writer sends what is left (a GOAWAY) and exits.
    writer_done_ = true;
    wr_.set();
    writer_exited_.wait();
}

// A response whose bytes the peer's flow-control window holds back for send_timeout is given
// up, as a write to a socket that takes nothing would be: its stream is reset (RST_STREAM), or,
// when the connection's own window is closed and no stream of it can move, the connection ends
// (GOAWAY; false). Without it a client that never opens its window keeps its streams, their
// bodies and the connection for good: nothing else times them out while they wait.
bool h2_session::check_stalls(int64_t now) {
    if (now < next_stall_check_) return true;
    if (opts_.send_timeout == forever) {
        next_stall_check_ = INT64_MAX;
        return true;
    }
    auto after = [this](int64_t t) { return sat_add(t, opts_.send_timeout); };
    // A stream that starts waiting later does so from a submission or a DATA frame after now:
    // its time is up no earlier than a send_timeout from now.
    int64_t next = after(now);
    const bool connection_closed = nghttp2_session_get_remote_window_size(ng_) <= 0;
    bool stalled_connection = false;
    streams_.for_each([&](h2_stream& st) {
        if (!st.awaits_window()) return;
        if (!connection_closed && nghttp2_session_get_stream_remote_window_size(ng_, st.id) > 0) return;
        // The connection's window closed with the last DATA frame of any stream.
        const int64_t since = connection_closed && data_sent_at_ > st.sent_at ? data_sent_at_ : st.sent_at;
        if (after(since) > now) {
            if (after(since) < next) next = after(since);
        } else if (connection_closed) {
            stalled_connection = true;
        } else {
            st.give_up();
        }
    });
    next_stall_check_ = next;
    if (!stalled_connection) return true;
    GLUON_LOG_RATE_LIMITED(debug, std::chrono::seconds(1), "gluon: http2: the client's window stayed closed");
    nghttp2_session_terminate_session(ng_, NGHTTP2_NO_ERROR);
    want_write();
    return false;
}

// A head begun (HEADERS without END_HEADERS) must end, with its CONTINUATION frames, within
// header_timeout, as an HTTP/1.1 head must. Nothing can come meanwhile but the rest of it, and
// it cannot be dropped (HPACK's table needs all of it): the connection ends (GOAWAY; false).
// Without it a client that sent a head's first frame and nothing more kept the connection,
// busy and so never idle, for good.
bool h2_session::check_heads(int64_t now) {
    if (now < next_head_check_) return true;
    int64_t next = INT64_MAX;
    bool late = false;
    streams_.for_each([&](h2_stream& st) {
        if (!st.head_until || st.closed) return;
        if (st.head_until <= now) late = true;
        else if (st.head_until < next) next = st.head_until;
    });
    next_head_check_ = next;
    if (!late) return true;
    GLUON_LOG_RATE_LIMITED(debug, std::chrono::seconds(1), "gluon: http2: a request head did not end in time");
    nghttp2_session_terminate_session(ng_, NGHTTP2_NO_ERROR);
    want_write();
    return false;
}

// The reader's wait while streams are open: until the next stall or lingering check, and no
// longer than body_timeout or idle_timeout, whichever is shorter. Streams end, and start to
// linger, in other fibers (a handler returning, the writer sending the last frame), and nothing
// wakes the reader for that: it sees them when it next looks, so a lingering stream is reset, or
// an idle connection closed, at most this much later than due.
duration h2_session::until_next_check(int64_t now) const noexcept {
    int64_t next = std::min({next_stall_check_, next_linger_check_, next_head_check_});
    next = std::min(next, sat_add(now, std::min(opts_.body_timeout, opts_.idle_timeout)));
    if (next == INT64_MAX) return forever;
    const int64_t left = next - now;
    return duration(left > 0 ? left : 0);
}

void h2_session::writer() {
    bool failed = false;
    for (;;) {
        (void)wr_.wait();
        wr_.reset();
        write_wanted_ = false;
        if (!failed && !flush()) {
            failed = gone_ = true;
            // The reader and the handlers' waits see it.
            if (net::socket_fd* sock = s_.socket()) (void)sys::shutdown(sock->get(), SHUT_RDWR);
            streams_.for_each([](h2_stream& st) {
                st.wake(st.in_ready);
                st.wake(st.out_room);
                st.interrupt_handler();
            });
        }
        if (writer_done_) break;
    }
    writer_exited_.signal();
}

long h2_session::on_send(const uint8_t* data, size_t len) {
    if (out_.size() >= k_send_batch) return NGHTTP2_ERR_WOULDBLOCK;
    out_.append(reinterpret_cast<const char*>(data), len);
    return static_cast<long>(len);
}

int h2_session::on_send_data(const nghttp2_frame& f, const uint8_t* framehd, size_t len, h2_stream& st) {
    if (out_.size() >= k_send_batch) return NGHTTP2_ERR_WOULDBLOCK;
    data_sent_at_ = st.sent_at = mono_coarse_ns();
    out_.append(reinterpret_cast<const char*>(framehd), 9);
    size_t pad = f.data.padlen;
    if (pad) out_ += static_cast<char>(pad - 1);
    if (!st.emit_data(out_, len)) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (pad > 1) out_.append(pad - 1, '\0');
    return 0;
}

bool h2_session::flush() {
    // nghttp2 hands frames to on_send and on_send_data, which gather them in out_ (a DATA
    // frame's body copied once, from the response straight into it) until a batch is full.
    for (;;) {
        out_.clear();
        if (nghttp2_session_send(ng_) != 0) return false;
        if (out_.empty()) return true;
        if (!s_.write_all(out_.data(), out_.size(), opts_.send_timeout)) return false;
    }
}

}  // namespace gluon::http::detail
