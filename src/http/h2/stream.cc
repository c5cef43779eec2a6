#include "stream.h"

#include <charconv>
#include <cstring>
#include <utility>

#include "../date.h"
#include "../http_counters.h"
#include "../path.h"
#include "fields.h"
#include "gluon/common/log.h"
#include "gluon/runtime/waiter.h"
#include "gluon/sys/ops.h"
#include "session.h"

namespace gluon::http::detail {

namespace {

constexpr size_t k_stream_buffer = 64 * 1024;  // a streamed body's bytes queued before write() waits

bool status_has_body(int s) noexcept { return s >= 200 && s != 204 && s != 304; }

long read_data(nghttp2_session*, int32_t, uint8_t*, size_t length, uint32_t* flags, nghttp2_data_source* src,
               void*) {
    return static_cast<h2_stream*>(src->ptr)->next_data(length, flags);
}

void error_body(response& res, int status) {
    std::string body = std::to_string(status);
    body += ' ';
    body += reason_phrase(status);
    body += '\n';
    res.status(status);
    res.content_type("text/plain");
    res.body(body);
}

}  // namespace

h2_stream::h2_stream(h2_session& s, int32_t id) noexcept : sess(s), id(id), req(*this), res(*this) {
    default_limits();
}

// Set when the stream opens, not when its handler starts: body bytes may come before that.
void h2_stream::default_limits() noexcept {
    req.max_body_ = sess.options().max_body_bytes;
    req.body_timeout_ = sess.options().body_timeout;
}

// The request's limit, which its handler may have lowered below what came, or a declared length
// over it.
bool h2_stream::body_over_limit() const noexcept {
    const request_head& h = req.head_;
    return in_total > req.max_body_ || (h.body == framing::length && h.content_length > req.max_body_);
}

net::byte_stream& h2_stream::stream() noexcept { return sess.stream(); }

std::string_view h2_stream::client_ip() { return sess.client_ip(); }

int h2_stream::make_request() {
    std::string_view method, path, authority;
    fields.clear();
    fields.reserve(refs.size());
    for (const field_ref& r : refs) {
        std::string_view name(hbuf.data() + r.name, r.name_len), value(hbuf.data() + r.value, r.value_len);
        if (name.empty() || name[0] != ':') fields.push_back({name, value});
        else if (name == ":method") method = value;
        else if (name == ":path") path = value;
        else if (name == ":authority") authority = value;
    }
    request_head& h = req.head_;
    h.headers = fields.data();
    h.header_count = fields.size();
    h.version_major = 2;
    h.version_minor = 0;
    h.verb = method_from_name(method);
    h.method_name = method;
    h.target = path;
    h.host = authority.empty() ? h.find("host") : authority;
    h.keep_alive = true;
    h.content_length = 0;
    h.body = in_done && in.empty() ? framing::none : framing::chunked;
    if (std::string_view cl = h.find("content-length"); !cl.empty()) {
        uint64_t v = 0;
        auto r = std::from_chars(cl.data(), cl.data() + cl.size(), v);
        if (r.ec != std::errc() || r.ptr != cl.data() + cl.size()) return 400;
        h.content_length = v;
        h.body = v ? framing::length : framing::none;
        // Over max_body_bytes: refused at the first read (read_body), after the handler may
        // have raised the limit for its route.
    }
    size_t q = path.find('?');
    h.path = path.substr(0, q);
    auto normal = detail::normal_path(h.path, req.path_storage_);
    if (!normal) return 400;
    req.path_ = *normal;
    req.query_ = h.query = q == std::string_view::npos ? std::string_view{} : path.substr(q + 1);
    h.target_authority = {};
    return 0;
}

// The handler threw: a 500 if nothing of its response has left yet; otherwise the stream is
// reset, so the client cannot take the part that was sent for a whole body.
void h2_stream::fail_response() {
    if (res.head_sent_) res.abort();
    else res.reset(), res.status(500);
}

void h2_stream::serve() {
    int refused = refuse ? refuse : make_request();
    if (refused) {
        error_body(res, refused);
    } else {
        try {
            sess.handler_fn()(req, res);
        } catch (const std::exception& e) {
            GLUON_LOG_RATE_LIMITED(error, std::chrono::seconds(1), "gluon: http handler for {} threw: {}",
                                   req.head_.target, e.what());
            fail_response();
        } catch (...) {
            GLUON_LOG_RATE_LIMITED(error, std::chrono::seconds(1), "gluon: http handler for {} threw",
                                   req.head_.target);
            fail_response();
        }
        end_interrupts();
        // A body left unread that is over the limit is refused as if it had been read (as over
        // HTTP/1.1, where the server reads the rest).
        if (!in_error && (in_pos < in.size() || !in_done) && body_over_limit()) in_error = EMSGSIZE;
        if (!res.head_sent_ && (in_error == EMSGSIZE || in_error == ETIMEDOUT)) {
            res.reset();
            error_body(res, in_error == EMSGSIZE ? 413 : 408);
        }
    }
    if (closed || sess.gone()) return;
    nghttp2_session* ng = sess.ng();
    if (res.detached_) {
        // HTTP/2 has no connection for a handler to take over.
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_INTERNAL_ERROR);
    } else if (res.streaming_) {
        if (!res.finished_) (void)res.finish();
    } else if (!submit(false)) {
        nghttp2_submit_rst_stream(ng, NGHTTP2_FLAG_NONE, id, NGHTTP2_INTERNAL_ERROR);
    }
    // A body the handler left unread is dropped, and its flow-control credit given back.
    if (size_t unread = in.size() - in_pos) nghttp2_session_consume(ng, id, unread);
    std::string().swap(in);
    in_pos = 0;
    sess.want_write();
    count_response(res.status_);
    if (sess.options().access_log)
        GLUON_INFO("- - - \"{} {} HTTP/2\" {} -", req.head_.method_name, req.head_.target, res.status_);
}

result<void> h2_stream::submit(bool streaming) {
    nv_list& nv = sess.scratch_fields();
    char status[4];
    std::to_chars(status, status + 3, res.status_ < 100 || res.status_ > 999 ? 500 : res.status_);
    nv.add(":status", {status, 3});
    const server_options& o = sess.options();
    if (!o.server_name.empty()) nv.add("server", o.server_name);
    std::string_view date = http_date_now();
    nv.add("date", date);
    nv.add_lines(res.fields_);
    uint64_t len = streaming ? res.declared_length_ : body_length();
    char digits[24];
    if (len != UINT64_MAX && status_has_body(res.status_)) {
        auto r = std::to_chars(digits, digits + sizeof digits, len);
        nv.add("content-length", {digits, static_cast<size_t>(r.ptr - digits)});
    }
    bool body = req.head_.verb != method::head && status_has_body(res.status_) &&
                (streaming || len > 0 || !res.trailers_.empty());
    nghttp2_data_provider prd;
    prd.source.ptr = this;
    prd.read_callback = read_data;
    int rv = nghttp2_submit_response(sess.ng(), id, nv.data(), nv.size(), body ? &prd : nullptr);
    if (rv != 0) return errno_error(rv == NGHTTP2_ERR_NOMEM ? ENOMEM : EPROTO);
    submitted = res.head_sent_ = true;
    if (!body) out_eof = true;
    sending = body;
    sent_at = mono_coarse_ns();
    sess.want_write();
    return {};
}

uint64_t h2_stream::body_length() const noexcept {
    using kind = response::body_kind;
    return res.kind_ == kind::file ? res.file_len_ : res.kind_ == kind::view ? res.body_view_.size() : res.body_.size();
}

long h2_stream::next_data(size_t length, uint32_t* flags) {
    *flags |= NGHTTP2_DATA_FLAG_NO_COPY;  // emit_data copies the bytes straight into the output
    auto end = [&] {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        sending = false;
        if (!res.trailers_.empty()) {
            nv_list nv;
            nv.add_lines(res.trailers_);
            if (nghttp2_submit_trailer(sess.ng(), id, nv.data(), nv.size()) == 0) *flags |= NGHTTP2_DATA_FLAG_NO_END_STREAM;
        }
    };
    if (res.streaming_) {
        size_t avail = out.size() - out_pos;
        if (!avail && !out_eof) {
            deferred = true;
            return NGHTTP2_ERR_DEFERRED;
        }
        size_t k = avail < length ? avail : length;
        if (out_eof && k == avail) end();
        return static_cast<long>(k);
    }
    uint64_t left = body_length() - body_off;
    size_t k = left < length ? static_cast<size_t>(left) : length;
    if (k == left) end();
    return static_cast<long>(k);
}

bool h2_stream::emit_data(std::string& to, size_t n) {
    if (res.streaming_) {
        to.append(out, out_pos, n);
        out_pos += n;
        if (out_pos == out.size()) out.clear(), out_pos = 0;
        wake(out_room);
        return true;
    }
    using kind = response::body_kind;
    if (res.kind_ == kind::file) {
        size_t at = to.size();
        to.resize(at + n);
        long r = sys::read(res.file_fd_, to.data() + at, n, res.file_off_ + static_cast<int64_t>(body_off));
        if (r != static_cast<long>(n)) return false;  // the file shrank or failed: the stream is reset
    } else {
        to.append((res.kind_ == kind::view ? res.body_view_.data() : res.body_.data()) + body_off, n);
    }
    body_off += n;
    if (body_off == body_length()) res.release();
    return true;
}

int h2_stream::wait(event& e, duration timeout) {
    if (closed) return ECONNRESET;
    if (sess.gone()) return ENODATA;
    e.reset();
    waiting_ = &e;
    auto r = e.wait(timeout);
    waiting_ = nullptr;
    return r ? 0 : r.error().value();
}

void h2_stream::reuse(int32_t new_id) noexcept {
    id = new_id;
    req.head_ = request_head{};
    req.path_ = req.query_ = {};
    req.params_.clear();
    req.body_.clear();
    res.reset();
    hbuf.clear();
    refs.clear();
    fields.clear();
    head_bytes = 0;
    refuse = 0;
    if (in.capacity() > 64 * 1024) std::string().swap(in);
    in.clear();
    in_pos = 0;
    in_total = 0;
    in_done = false;
    in_error = 0;
    default_limits();
    submitted = deferred = out_eof = sending = false;
    lingering_since = 0;
    out_error = 0;
    if (out.capacity() > 64 * 1024) std::string().swap(out);
    out.clear();
    out_pos = 0;
    body_off = 0;
    closed = reset = handler_done = handler_started = false;
    handler_fiber = nullptr;
    interrupt_armed_ = interrupted_ = false;
}

result<void> h2_stream::wait_abandoned(duration timeout) {
    step_timeouts t(timeout);
    for (;;) {
        int e = wait(in_ready, t.next());  // woken by body bytes too: wait again
        if (e == ECONNRESET || e == ENODATA) return {};
        if (e) return errno_error(e);
    }
}

result<size_t> h2_stream::read_body(void* buf, size_t n, duration timeout) {
    // The caller's own timeout, when shorter, ends this read only (the body stays readable);
    // body_timeout means the client stalled, and the body is dead.
    const bool own_timeout = timeout < req.body_timeout_;
    const duration limit = own_timeout ? timeout : req.body_timeout_;
    step_timeouts t(limit);  // woken without bytes (an empty DATA frame): only what is left of it
    for (;;) {
        if (in_error) return errno_error(in_error);
        const size_t avail = in.size() - in_pos;
        if (!avail && in_done) return size_t{0};
        if (body_over_limit()) {
            // The rest is dropped as it comes (on_data), its flow-control credit given back.
            in_error = EMSGSIZE;
            nghttp2_session_consume(sess.ng(), id, avail);
            std::string().swap(in);
            in_pos = 0;
            if (nghttp2_session_want_write(sess.ng())) sess.want_write();
            return errno_error(EMSGSIZE);
        }
        if (avail) {
            size_t k = n < avail ? n : avail;
            std::memcpy(buf, in.data() + in_pos, k);
            in_pos += k;
            if (in_pos == in.size()) in.clear(), in_pos = 0;
            nghttp2_session_consume(sess.ng(), id, k);
            if (nghttp2_session_want_write(sess.ng())) sess.want_write();
            return k;
        }
        if (int e = wait(in_ready, t.next())) {
            if (e == ETIMEDOUT && !own_timeout) in_error = e;
            return errno_error(e);
        }
    }
}

void h2_stream::on_data(const uint8_t* data, size_t len) {
    nghttp2_session* ng = sess.ng();
    if (handler_done || in_error) {
        if (lingering_since) lingering_since = mono_now_ns();  // still sending: not stuck
        nghttp2_session_consume(ng, id, len);
        return;
    }
    // Kept even past the body's limit: the handler may raise it before its next read, which
    // checks it (read_body). The stream's flow-control window bounds what waits here.
    in_total += len;
    in.append(reinterpret_cast<const char*>(data), len);
    wake(in_ready);
}

void h2_stream::on_close(uint32_t error_code) noexcept {
    closed = true;
    // A stream closes cleanly only once both sides ended it, so after the response's last
    // frame went (submitted, no longer sending); before that the client gave it up.
    reset = error_code != NGHTTP2_NO_ERROR || !submitted || sending;
    wake(in_ready);
    wake(out_room);
    if (reset) interrupt_handler();
}

bool h2_stream::abandoned() const noexcept { return reset || sess.gone(); }

result<void> h2_stream::interrupt_when_abandoned(deadline_t at) {
    interrupt_armed_ = true;
    if (abandoned()) {
        interrupt_handler();
        return {};
    }
    if (at == k_no_deadline) return {};
    interrupt_at_.st = this;
    return interrupt_at_.arm(at, [](vcpu_timer* t) noexcept { static_cast<interrupt_timer*>(t)->st->interrupt_handler(); });
}

// Everything here runs on the session's vCPU (the reader, the writer, the timer and the
// handler), and interrupt_armed_ is cleared as the handler returns, before its worker takes
// another stream: the interrupt never reaches another request's handler.
void h2_stream::interrupt_handler() noexcept {
    if (!interrupt_armed_ || interrupted_ || !handler_fiber) return;
    interrupted_ = true;
    interrupt_at_.disarm();
    (void)handler_fiber->interrupt();
}

// The interrupt was for this request only: one that the handler left pending would fail the
// worker's wait for the next stream, or that stream's handler.
void h2_stream::end_interrupts() noexcept {
    interrupt_armed_ = false;
    interrupt_at_.disarm();
    if (std::exchange(interrupted_, false)) (void)take_interrupt();
}

void h2_stream::give_up() noexcept {
    if (closed || out_error) return;
    out_error = ETIMEDOUT;
    sending = false;
    nghttp2_submit_rst_stream(sess.ng(), NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
    sess.want_write();
    wake(out_room);
}

result<void> h2_stream::write_body(response& r, std::string_view data) {
    if (closed) return errno_error(ECONNRESET);
    if (sess.gone()) return errno_error(EPIPE);
    if (out_error) return errno_error(out_error);
    if (!submitted) GLUON_TRY(submit(true));
    if (data.empty() || out_eof) return {};
    out.append(data);
    if (deferred) {
        deferred = false;
        nghttp2_session_resume_data(sess.ng(), id);
    }
    sess.want_write();
    while (out.size() - out_pos > k_stream_buffer) {
        int e = wait(out_room, sess.options().send_timeout);
        if (!e) e = out_error;
        // Bytes of this write are queued: ending the body after them would make it look whole.
        if (e == ETIMEDOUT) give_up();
        if (e) return errno_error(e == ENODATA ? EPIPE : e);
    }
    (void)r;
    return {};
}

result<void> h2_stream::finish_body(response&, bool short_body) {
    if (closed) return errno_error(ECONNRESET);
    if (sess.gone()) return errno_error(EPIPE);
    if (out_error) return errno_error(out_error);
    if (!submitted) GLUON_TRY(submit(true));
    if (short_body && req.head_.verb != method::head) {
        nghttp2_submit_rst_stream(sess.ng(), NGHTTP2_FLAG_NONE, id, NGHTTP2_INTERNAL_ERROR);
        sess.want_write();
        return errno_error(EINVAL);
    }
    out_eof = true;
    if (deferred) {
        deferred = false;
        nghttp2_session_resume_data(sess.ng(), id);
    }
    sess.want_write();
    return {};
}

}  // namespace gluon::http::detail
