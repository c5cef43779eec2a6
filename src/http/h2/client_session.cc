#include "client_session.h"

#include <sys/socket.h>

#include <cstring>
#include <new>

#include "gluon/common/lazy.h"
#include "gluon/common/log.h"
#include "gluon/http/message.h"
#include "gluon/http/parser.h"
#include "gluon/net/socket.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sys/ops.h"
#include "fields.h"

namespace gluon::http::detail {

namespace {

constexpr size_t k_send_batch = 64 * 1024;
constexpr size_t k_call_buffer = 64 * 1024;        // request body queued before write() waits
constexpr int32_t k_window = 1 << 20;              // response bytes buffered per stream and connection

h2_call* call_of(nghttp2_session* ng, int32_t id) {
    return static_cast<h2_call*>(nghttp2_session_get_stream_user_data(ng, id));
}

int on_header(nghttp2_session* ng, const nghttp2_frame* f, const uint8_t* name, size_t namelen, const uint8_t* value,
              size_t valuelen, uint8_t, void*) {
    if (f->hd.type != NGHTTP2_HEADERS) return 0;
    h2_call* c = call_of(ng, f->hd.stream_id);
    if (c && !c->on_header(f->headers.cat == NGHTTP2_HCAT_RESPONSE, {reinterpret_cast<const char*>(name), namelen},
                           {reinterpret_cast<const char*>(value), valuelen}))
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // nghttp2 resets the stream, skips the block's rest
    return 0;
}

int on_frame_recv(nghttp2_session*, const nghttp2_frame* f, void* u) {
    return static_cast<h2_client_session*>(u)->on_frame(*f);
}

int on_data_chunk(nghttp2_session* ng, uint8_t, int32_t id, const uint8_t* data, size_t len, void*) {
    if (h2_call* c = call_of(ng, id)) c->on_data(data, len);
    else nghttp2_session_consume(ng, id, len);
    return 0;
}

int on_stream_close(nghttp2_session* ng, int32_t id, uint32_t code, void*) {
    if (h2_call* c = call_of(ng, id)) c->on_close(code);
    return 0;
}

long read_data(nghttp2_session* ng, int32_t id, uint8_t* buf, size_t length, uint32_t* flags, nghttp2_data_source*,
               void*) {
    h2_call* c = call_of(ng, id);
    if (!c) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    return c->next_data(buf, length, flags);
}

struct setup {
    nghttp2_session_callbacks* cbs = nullptr;
    nghttp2_option* opt = nullptr;
    setup() {
        if (nghttp2_session_callbacks_new(&cbs) != 0 || nghttp2_option_new(&opt) != 0) throw std::bad_alloc();
        nghttp2_session_callbacks_set_on_header_callback(cbs, on_header);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs, on_frame_recv);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, on_data_chunk);
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs, on_stream_close);
        nghttp2_option_set_no_auto_window_update(opt, 1);  // the window opens as the caller reads
        nghttp2_option_set_max_settings(opt, 32);
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

// ---- h2_call ----------------------------------------------------------------------------------

h2_call::~h2_call() { cancel(); }

void h2_call::give_back(size_t n) noexcept {
    if (sess_->gone() || n == 0) return;
    // The connection's window counts bytes buffered even after their stream closed.
    if (open_) nghttp2_session_consume(sess_->ng(), id_, n);
    else nghttp2_session_consume_connection(sess_->ng(), n);
    if (nghttp2_session_want_write(sess_->ng())) sess_->want_write();
}

void h2_call::cancel() noexcept {
    give_back(in_.size() - in_pos_);
    in_.clear();
    in_pos_ = 0;
    if (!open_) return;
    open_ = false;
    sess_->calls.erase(*this);
    if (!sess_->gone()) {
        nghttp2_session_set_stream_user_data(sess_->ng(), id_, nullptr);
        if (!closed_) nghttp2_submit_rst_stream(sess_->ng(), NGHTTP2_FLAG_NONE, id_, NGHTTP2_CANCEL);
        sess_->want_write();
    }
}

result<void> h2_call::start(std::string_view method, std::string_view scheme, std::string_view authority,
                            std::string_view path, const std::vector<std::pair<std::string, std::string>>& fields,
                            bool body) {
    if (sess_->gone() || !sess_->usable()) return errno_error(EPIPE);
    nv_list nv;
    nv.add(":method", method);
    nv.add(":scheme", scheme);
    nv.add(":authority", authority);
    nv.add(":path", path);
    for (const auto& [k, v] : fields)
        if (!connection_specific(k) && !iequals(k, "host")) nv.add(k, v);
    nghttp2_data_provider prd;
    prd.source.ptr = this;
    prd.read_callback = read_data;
    int32_t id = nghttp2_submit_request(sess_->ng(), nullptr, nv.data(), nv.size(), body ? &prd : nullptr, this);
    if (id < 0) return errno_error(id == NGHTTP2_ERR_NOMEM ? ENOMEM : id == NGHTTP2_ERR_STREAM_ID_NOT_AVAILABLE ? EPIPE : EPROTO);
    id_ = id;
    open_ = true;
    out_eof_ = !body;
    sess_->calls.push_back(*this);
    sess_->want_write();
    return {};
}

int h2_call::wait(duration timeout) {
    if (closed_ && !in_done_) return ECONNRESET;
    if (gone_) return sess_->dead() ? ETIMEDOUT : ENODATA;
    ev_.reset();
    waiting_ = true;
    auto r = ev_.wait(timeout);
    waiting_ = false;
    return r ? 0 : r.error().value();
}

result<void> h2_call::write(std::string_view data, stall_timeout timeout) {
    if (closed_) return errno_error(ECONNRESET);
    if (gone_) return errno_error(EPIPE);
    out_.append(data);
    if (deferred_) {
        deferred_ = false;
        nghttp2_session_resume_data(sess_->ng(), id_);
    }
    sess_->want_write();
    // Each wait ends with a few bytes sent (a peer may open its window a byte at a time): the
    // deadline is the call's, not the wait's.
    step_timeouts left(timeout);
    while (out_.size() - out_pos_ > k_call_buffer) {
        // Nothing more leaves a closed stream: one the server reset after its whole answer
        // (RST_STREAM NO_ERROR, RFC 9113 8.1) woke this wait without failing it, and the next
        // wait lasted the whole timeout.
        if (closed_) return errno_error(ECONNRESET);
        if (int e = wait(left.next())) return errno_error(e == ENODATA ? EPIPE : e);
    }
    return {};
}

result<void> h2_call::finish() {
    if (closed_) return errno_error(ECONNRESET);
    if (gone_) return errno_error(EPIPE);
    out_eof_ = true;
    if (deferred_) {
        deferred_ = false;
        nghttp2_session_resume_data(sess_->ng(), id_);
    }
    sess_->want_write();
    return {};
}

long h2_call::next_data(uint8_t* buf, size_t length, uint32_t* flags) {
    size_t avail = out_.size() - out_pos_;
    if (!avail && !out_eof_) {
        deferred_ = true;
        return NGHTTP2_ERR_DEFERRED;
    }
    size_t k = avail < length ? avail : length;
    std::memcpy(buf, out_.data() + out_pos_, k);
    out_pos_ += k;
    if (out_pos_ == out_.size()) out_.clear(), out_pos_ = 0;
    if (out_eof_ && out_.empty()) *flags |= NGHTTP2_DATA_FLAG_EOF;
    wake();
    return static_cast<long>(k);
}

result<void> h2_call::wait_head(duration timeout) {
    step_timeouts left(timeout);
    return wait_head(left);
}

// Wakes come from the request body's progress and interim heads too, so the loops count one
// deadline down rather than giving each wait the whole timeout again.
result<void> h2_call::wait_head(step_timeouts& left) {
    while (!head_done_) {
        if (too_big_) return errno_error(EPROTO);
        if (closed_) return errno_error(ECONNRESET);
        if (int e = wait(left.next())) return errno_error(e);
    }
    return {};
}

result<size_t> h2_call::read(char* buf, size_t n, duration timeout) {
    step_timeouts left(timeout);
    GLUON_TRY(wait_head(left));
    for (;;) {
        if (size_t avail = in_.size() - in_pos_) {
            size_t k = n < avail ? n : avail;
            std::memcpy(buf, in_.data() + in_pos_, k);
            in_pos_ += k;
            if (in_pos_ == in_.size()) in_.clear(), in_pos_ = 0;
            give_back(k);
            return k;
        }
        if (too_big_) return errno_error(EPROTO);  // the trailers
        if (in_done_) return size_t{0};
        if (closed_) return errno_error(ECONNRESET);
        if (int e = wait(left.next())) return errno_error(e);
    }
}

bool h2_call::on_header(bool head, std::string_view name, std::string_view value) {
    // Each block is bounded as it arrives: HPACK turns one byte into a whole field of the
    // dynamic table (up to 4 KiB), so a frame's size says little about what it holds.
    const limits& lim = sess_->head_limits();
    block_bytes_ += name.size() + value.size() + 32;  // RFC 9113 6.5.2's measure
    if (name.empty() || name[0] != ':') ++block_fields_;
    if (too_big_ || block_fields_ > lim.max_headers || block_bytes_ > lim.max_head_bytes) {
        too_big_ = true;
        decltype(headers_)().swap(headers_);
        decltype(trailers_)().swap(trailers_);
        wake();
        return false;
    }
    if (head_done_) {  // trailers
        trailers_.emplace_back(name, value);
        return true;
    }
    (void)head;
    if (name == ":status") {
        int s = 0;
        for (char c : value) s = s * 10 + (c - '0');
        status_ = s;
        headers_.clear();  // an interim answer's fields are not the response's
    } else if (!name.empty() && name[0] != ':') {
        headers_.emplace_back(name, value);
    }
    return true;
}

void h2_call::on_head_end(bool end_stream) {
    block_bytes_ = block_fields_ = 0;
    if (!head_done_ && status_ >= 200) head_done_ = true;
    if (end_stream) in_done_ = true;
    wake();
}

void h2_call::on_data(const uint8_t* p, size_t n) {
    in_.append(reinterpret_cast<const char*>(p), n);
    wake();
}

void h2_call::on_end() noexcept {
    in_done_ = true;
    wake();
}

void h2_call::on_close(uint32_t code) noexcept {
    closed_ = true;
    reset_code_ = code;
    if (open_) {
        open_ = false;
        sess_->calls.erase(*this);
    }
    // A NO_ERROR close ends the answer only if END_STREAM did (on_head_end, on_end): a reset
    // with NO_ERROR that cuts an answer short is a reset (ECONNRESET), not its end.
    wake();
}

void h2_call::on_gone() noexcept {
    gone_ = true;
    open_ = false;
    // nghttp2 still has the stream and this call as its data: the writer's last flush may send
    // what is queued for it (a RST_STREAM closes it, calling on_stream_close back) after the
    // caller has seen the end and destroyed the call, which a session that is gone does not
    // unlink in cancel().
    nghttp2_session_set_stream_user_data(sess_->ng(), id_, nullptr);
    wake();
}

// ---- h2_client_session ------------------------------------------------------------------------

h2_client_session::h2_client_session(private_tag, std::unique_ptr<net::byte_stream> s, duration send_timeout,
                                     const limits& head_limits, duration ping_after, duration ping_timeout)
    : s_(std::move(s)), send_timeout_(send_timeout), head_limits_(head_limits), ping_after_(ping_after),
      ping_timeout_(ping_timeout), last_read_ns_(mono_coarse_ns()), home_(gluon::detail::current_vcpu()) {
    const setup& su = nghttp2_setup();
    if (nghttp2_session_client_new2(&ng_, su.cbs, this, su.opt) != 0) throw std::bad_alloc();
}

h2_client_session::~h2_client_session() { nghttp2_session_del(ng_); }

result<std::shared_ptr<h2_client_session>> h2_client_session::start(std::unique_ptr<net::byte_stream> s,
                                                                    duration send_timeout,
                                                                    const limits& head_limits, duration ping_after,
                                                                    duration ping_timeout) {
    auto self = std::make_shared<h2_client_session>(private_tag{}, std::move(s), send_timeout, head_limits,
                                                    ping_after, ping_timeout);
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<uint32_t>(k_window)},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, static_cast<uint32_t>(head_limits.max_head_bytes)},
        {NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES, 1},  // RFC 9218: no priority tree to keep
    };
    nghttp2_submit_settings(self->ng_, NGHTTP2_FLAG_NONE, iv, sizeof iv / sizeof iv[0]);
    nghttp2_session_set_local_window_size(self->ng_, NGHTTP2_FLAG_NONE, 0, k_window);
    auto w = GLUON_TRY(spawn([self] { self->writer(self); }));
    (void)w.detach();
    auto r = spawn([self] { self->reader(self); });
    if (!r) {
        self->close();
        return unexpected(r.error());
    }
    (void)r->detach();
    if (ping_after != forever) {
        auto d = spawn([self] { self->watchdog(self); });
        if (!d) {
            self->close();
            return unexpected(d.error());
        }
        (void)d->detach();
    }
    self->want_write();
    return self;
}

void h2_client_session::close() noexcept {
    if (gluon::detail::current_vcpu() != home_) {
        // nghttp2 and the session's flags are its vCPU's alone; its writer's event is safe to
        // set from any thread, and the writer closes the session there. A session whose vCPU
        // has ended has no writer left to wake: setting the event then touches only the event.
        close_asked_.store(true, std::memory_order_release);
        wr_.set();
        return;
    }
    if (closing_) return;
    closing_ = true;
    if (!gone_) {
        nghttp2_session_terminate_session(ng_, NGHTTP2_NO_ERROR);
        want_write();
        if (net::socket_fd* sock = s_->socket()) (void)sys::shutdown(sock->get(), SHUT_RD);
    }
}

int h2_client_session::on_frame(const nghttp2_frame& f) {
    if (f.hd.type == NGHTTP2_GOAWAY) {
        goaway_ = true;
        return 0;
    }
    h2_call* c = call_of(ng_, f.hd.stream_id);
    if (!c) return 0;
    if (f.hd.type == NGHTTP2_HEADERS) c->on_head_end(f.hd.flags & NGHTTP2_FLAG_END_STREAM);
    else if (f.hd.type == NGHTTP2_DATA && (f.hd.flags & NGHTTP2_FLAG_END_STREAM)) c->on_end();
    return 0;
}

void h2_client_session::reader(std::shared_ptr<h2_client_session> self) {
    while (!gone_ && (nghttp2_session_want_read(ng_) || nghttp2_session_want_write(ng_))) {
        auto n = s_->read_some(buf_, sizeof buf_, forever);
        if (!n || *n == 0) break;
        ++reads_;
        last_read_ns_ = mono_coarse_ns();
        auto rv = nghttp2_session_mem_recv(ng_, reinterpret_cast<const uint8_t*>(buf_), *n);
        if (rv < 0) {
            GLUON_LOG_RATE_LIMITED(debug, std::chrono::seconds(1), "gluon: http2 client: {}",
                                   nghttp2_strerror(static_cast<int>(rv)));
            break;
        }
        if (nghttp2_session_want_write(ng_)) want_write();
    }
    gone_ = true;
    while (h2_call* c = calls.pop_front()) c->on_gone();
    want_write();  // the writer sees it and exits
    dog_.set();    // and so does the watchdog
    (void)self;
}

// A server that stops answering without closing the connection held each call until its read
// timeout, and the session, still usable, took every new one. One fiber and one timer per
// session watch for it, none per call: only a silence while calls wait is checked, and an idle
// connection is left alone.
void h2_client_session::watchdog(std::shared_ptr<h2_client_session> self) {
    const int64_t after = ping_after_.count();
    while (!gone_) {
        const int64_t quiet = mono_coarse_ns() - last_read_ns_;
        if (calls.empty() || quiet < after) {
            auto w = dog_.wait(duration(calls.empty() || quiet < 0 ? after : after - quiet));
            if (!w && w.error() == std::errc::operation_canceled) break;  // the vCPU is stopping
            continue;
        }
        // Anything read after the PING counts as its answer: the ACK comes behind it.
        const uint64_t seen = reads_;
        if (nghttp2_submit_ping(ng_, NGHTTP2_FLAG_NONE, nullptr) != 0) break;
        want_write();
        auto w = dog_.wait(ping_timeout_);
        if (!w && w.error() == std::errc::operation_canceled) break;
        if (gone_ || reads_ != seen) continue;
        dead_ = true;
        GLUON_LOG_RATE_LIMITED(debug, std::chrono::seconds(1), "gluon: http2 client: PING unanswered, connection dropped");
        // The reader's read ends, and with it the calls (ETIMEDOUT: see h2_call::wait).
        if (net::socket_fd* sock = s_->socket()) (void)sys::shutdown(sock->get(), SHUT_RDWR);
        break;
    }
    (void)self;
}

void h2_client_session::writer(std::shared_ptr<h2_client_session> self) {
    for (;;) {
        (void)wr_.wait();
        wr_.reset();
        write_wanted_ = false;
        // Read after the reset: a close() from afar set the flag before the event, so either
        // this sees it or the event stays set for the next turn.
        if (close_asked_.exchange(false, std::memory_order_acquire)) close();
        if (!flush()) {
            if (net::socket_fd* sock = s_->socket()) (void)sys::shutdown(sock->get(), SHUT_RDWR);
            break;
        }
        if (gone_) break;
    }
    (void)self;
}

bool h2_client_session::flush() {
    for (;;) {
        out_.clear();
        for (;;) {
            const uint8_t* p;
            auto n = nghttp2_session_mem_send(ng_, &p);
            if (n < 0) return false;
            if (n == 0) break;
            out_.append(reinterpret_cast<const char*>(p), static_cast<size_t>(n));
            if (out_.size() >= k_send_batch) break;
        }
        if (out_.empty()) return true;
        if (!s_->write_all(out_.data(), out_.size(), send_timeout_)) return false;
    }
}

result<void> h2_client_session::exchange(std::string_view method, const url& u, const client_request& req,
                                         bool with_body, const std::vector<std::pair<std::string, std::string>>& fields,
                                         uint64_t max_body, duration read_timeout, deadline_t total,
                                         const std::function<bool(std::string_view)>* on_body, client_response& out,
                                         bool& started, bool& refused) {
    auto left = [&] {
        duration l = time_left(total);
        return read_timeout < l ? read_timeout : l;
    };
    h2_call call(shared_from_this());
    // However the exchange ends (the refusal fails a write as well as a wait).
    struct note_refused {
        const h2_call& c;
        bool& r;
        ~note_refused() { r = c.refused(); }
    } note{call, refused};
    bool streamed = with_body && req.body_source;
    bool body = streamed || (with_body && !req.body.empty());
    std::vector<std::pair<std::string, std::string>> f = fields;
    if (with_body && !streamed && (body || method == "POST" || method == "PUT" || method == "PATCH"))
        f.emplace_back("content-length", std::to_string(req.body.size()));
    GLUON_TRY(call.start(method, u.scheme, u.authority(), u.target, f, body));
    result<void> sent;
    if (streamed) {
        char chunk[16 * 1024];
        while (sent) {
            size_t n = GLUON_TRY(req.body_source(chunk, sizeof chunk));
            if (n == 0) break;
            sent = call.write({chunk, n}, stall_timeout{read_timeout, total});
        }
        if (sent) sent = call.finish();
    } else if (body) {
        sent = call.write(req.body, stall_timeout{read_timeout, total});
        if (sent) sent = call.finish();
    }
    // A server may answer before the body has all gone and then ask for the rest not to be
    // sent (RST_STREAM NO_ERROR, RFC 9113 8.1): its answer stands.
    if (!sent && !call.answered_early()) return unexpected(sent.error());
    GLUON_TRY(call.wait_head(left()));
    started = true;
    out.status = call.status();
    out.reason.assign(reason_phrase(call.status()));
    out.headers = call.headers();
    out.body.clear();
    if (req.on_head && !req.on_head(out)) return errno_error(ECANCELED);
    uint64_t got = 0;
    char buf[16 * 1024];
    for (;;) {
        size_t n = GLUON_TRY(call.read(buf, sizeof buf, left()));
        if (n == 0) break;
        got += n;
        if (got > max_body) return errno_error(EMSGSIZE);
        if (on_body) {
            if (!(*on_body)({buf, n})) return errno_error(ECANCELED);
        } else {
            out.body.append(buf, n);
        }
    }
    return {};
}

}  // namespace gluon::http::detail
