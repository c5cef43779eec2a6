#include "connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>

#include "date.h"
#include "gluon/net/tls.h"
#include "h2/session.h"
#include "gluon/common/log.h"
#include "gluon/net/socket.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sys/mm.h"
#include "gluon/sys/ops.h"
#include "http_counters.h"
#include "path.h"

namespace gluon::http::detail {

namespace {

constexpr size_t k_initial_buffer = 8 * 1024;
constexpr size_t k_body_room = 8 * 1024;       // free space after a head with a chunked body
constexpr size_t k_flush_at = 64 * 1024;       // output buffered before it is written anyway
constexpr size_t k_copy_body_below = 16 * 1024;  // smaller bodies are copied into the output
// ... even with nothing pipelined behind them: one buffer goes out with send(2), which costs
// the kernel 3-5% less than sendmsg(2) of the same 130 bytes in two iovecs (a C loop over
// loopback TCP); copying a few hundred bytes costs less than that.
constexpr size_t k_always_copy_below = 1024;
constexpr uint64_t k_drain_limit = 64 * 1024;  // unread body discarded to keep a connection
constexpr auto k_linger = std::chrono::seconds(1);

// Where discarded input goes (an unread body, what arrives while closing). Per thread rather
// than on the stack: a 4 KiB array in a frame of the connection loop would make every parked
// connection's fiber span another page.
thread_local char t_discard[4096];

void append_number(std::string& out, uint64_t v) {
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, static_cast<size_t>(r.ptr - buf));
}

bool status_has_body(int s) noexcept { return s >= 200 && s != 204 && s != 304; }

// Blocks of closed connections, kept per thread for the next connections: glibc's aligned
// allocation splits a larger chunk and frees the rest, and with a connection per request that
// (malloc_consolidate and friends) showed up at several percent of the server's CPU.
class block_cache {
public:
    char* take(size_t size) noexcept {
        if (size == size_ && n_) return blocks_[--n_];
        return static_cast<char*>(std::aligned_alloc(4096, size));
    }
    void give(char* b, size_t size) noexcept {
        if (n_ == 0) size_ = size;
        if (size == size_ && n_ < k_keep)
            blocks_[n_++] = b;
        else
            std::free(b);
    }
    ~block_cache() {
        while (n_) std::free(blocks_[--n_]);
    }

private:
    static constexpr unsigned k_keep = 32;  // at most 32 blocks (384 KiB by default) per thread
    char* blocks_[k_keep];
    unsigned n_ = 0;
    size_t size_ = 0;
};
thread_local block_cache t_blocks;

}  // namespace

void connection::block_deleter::operator()(char* p) const noexcept { t_blocks.give(p, size); }

connection::connection(net::byte_stream& s, const handler& h, const server_options& opts,
                       const bool* stopping)
    : s_(s), h_(h), opts_(opts), stopping_(stopping), req_(*this), res_(*this) {
    // One page-aligned block for the head's fields and the receive buffer, so that an idle
    // connection can hand its pages back with one madvise and keep the block.
    fields_bytes_ = (opts.limits.max_headers * sizeof(header) + 63) & ~size_t(63);
    block_size_ = (fields_bytes_ + k_initial_buffer + 4095) & ~size_t(4095);
    block_ = std::unique_ptr<char, block_deleter>(t_blocks.take(block_size_), block_deleter(block_size_));
    if (!block_) throw std::bad_alloc();
    req_.head_.headers = reinterpret_cast<header*>(block_.get());
    in_ = block_.get() + fields_bytes_;
    cap_ = block_size_ - fields_bytes_;
    local_http_counters().connections_opened.add(1);
}

connection::~connection() {
    res_.reset();
    local_http_counters().connections_closed.add(1);
}

void connection::run() {
    if (opts_.http2) {
        auto* tls = dynamic_cast<net::tls::stream*>(&s_);
        if (tls && tls->alpn_selected() == "h2") return run_h2({});
    }
    for (;;) {
        got g = read_head();
        if (g == got::h2) return run_h2({in_ + start_, end_ - start_});
        if (g == got::failed) count_response(res_.status_);  // refused with 4xx/5xx
        if (g != got::head) break;
        handle();
        count_response(res_.status_);
        if (!keep_alive_) break;
    }
    lingering_close();
}

// A handler that has detached writes to the stream itself: the answers to earlier pipelined
// requests, still buffered, go out first.
net::byte_stream& connection::stream() noexcept {
    if (res_.detached_) (void)flush();
    return s_;
}

result<std::string_view> connection::upgrade(response&, std::string_view raw_head) {
    GLUON_TRY(write_raw(raw_head));
    std::string_view v(in_ + start_, end_ - start_);
    start_ = end_;
    return v;
}

void connection::run_h2(std::string_view preread) {
    h2_session h2(s_, h_, opts_, stopping_, &idle_, in_, cap_);
    struct unset {  // however run() ends (bad_alloc escapes it)
        h2_session*& p;
        ~unset() { p = nullptr; }
    } guard{h2_};
    h2_ = &h2;
    h2.run(preread);
}

void connection::grow(size_t want) {
    size_t cap = cap_;
    while (cap < want) cap *= 2;
    std::unique_ptr<char[]> b(new char[cap]);
    std::memcpy(b.get(), in_, end_);
    grown_ = std::move(b);
    in_ = grown_.get();
    cap_ = cap;
}

result<size_t> connection::wait_idle(duration timeout) {
    start_ = end_ = 0;
    idle_ = true;
    // A connection that stays idle long enough gives its memory back: an idle keep-alive
    // connection then costs little more than its fiber's stack.
    duration first = timeout < opts_.release_buffers_after ? timeout : opts_.release_buffers_after;
    auto n = s_.read_some(in_, cap_, first);
    if (!n && n.error() == std::errc::timed_out && timeout > first) {
        release_memory();
        n = s_.read_some(in_, cap_, timeout - first);
    }
    idle_ = false;
    if (n) end_ = *n;
    return n;
}

void connection::release_memory() noexcept {
    if (grown_) {
        grown_.reset();
        in_ = block_.get() + fields_bytes_;
        cap_ = block_size_ - fields_bytes_;
    }
    (void)sys::madvise(block_.get(), block_size_, MADV_DONTNEED);  // zero pages on the next touch
    std::string().swap(out_);
    res_.shrink();
    req_.shrink();
    this_fiber::trim_stack();
}

connection::got connection::read_head() {
    size_t scanned = 0;
    deadline_t deadline = k_no_deadline;
    // A head may be preceded by up to max_head_bytes of empty lines; the parser reports an
    // oversized head before the buffer is full.
    const size_t max_cap = 2 * opts_.limits.max_head_bytes + 16;
    for (;;) {
        bool partial_preface = false;
        if (end_ > start_ && served_ == 0 && opts_.http2 && in_[start_] == 'P') {
            // HTTP/2 with prior knowledge opens with its connection preface.
            static constexpr std::string_view preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
            std::string_view got_bytes(in_ + start_, std::min(end_ - start_, preface.size()));
            if (got_bytes == preface) return got::h2;
            partial_preface = preface.starts_with(got_bytes);
            if (partial_preface && deadline == k_no_deadline) deadline = deadline_after(opts_.header_timeout);
        }
        if (end_ > start_ && !partial_preface) {
            size_t begin = start_;
            parse_result r = parse_request({in_ + begin, end_ - begin}, req_.head_, opts_.limits, scanned);
            if (r.state == parse_result::complete) {
                head_end_ = begin + r.consumed;
                start_ = head_end_;
                if (req_.head_.body == framing::chunked && cap_ - head_end_ < k_body_room) {
                    // Room for the body after the head; the head moves, so parse it again.
                    grow(head_end_ + k_body_room);
                    scanned = 0;
                    (void)parse_request({in_ + begin, end_ - begin}, req_.head_, opts_.limits, scanned);
                }
                return got::head;
            }
            if (r.state == parse_result::invalid) {
                send_error(r.status, r.why, false);
                return got::failed;
            }
            if (deadline == k_no_deadline) deadline = deadline_after(opts_.header_timeout);
        }
        if (!flush()) return got::closed;
        bool idle = end_ == start_;
        if (idle && stopping_ && *stopping_) return got::closed;
        if (idle) {
            auto n = wait_idle(served_ ? opts_.idle_timeout : opts_.header_timeout);
            if (!n || *n == 0) return got::closed;
            continue;
        }
        if (start_ > 0) {
            std::memmove(in_, in_ + start_, end_ - start_);
            end_ -= start_;
            start_ = 0;
        }
        if (end_ == cap_) grow(cap_ * 2 < max_cap ? cap_ * 2 : max_cap);
        auto n = s_.read_some(in_ + end_, cap_ - end_, time_left(deadline));
        if (!n) {
            if (n.error() == std::errc::timed_out) send_error(408, "header timeout", false);
            return got::closed;
        }
        if (*n == 0) return got::closed;
        end_ += *n;
    }
}

void connection::handle() {
    request_head& h = req_.head_;
    // The parser split the target (the path of an absolute-form one follows its authority).
    auto normal = detail::normal_path(h.path, req_.path_storage_);
    req_.path_ = normal ? *normal : h.path;
    req_.query_ = h.query;
    req_.params_.clear();
    req_.body_.clear();
    res_.reset();
    continue_sent_ = false;
    body_error_ = 0;
    body_stalled_ = false;
    pending_ = 0;
    body_done_ = h.body == framing::none;
    body_left_ = h.body == framing::length ? h.content_length : 0;
    req_.max_body_ = opts_.max_body_bytes;
    req_.body_timeout_ = opts_.body_timeout;
    req_.body_until_ = body_done_ ? k_no_deadline : timeout_deadline(opts_.body_total_timeout);
    if (h.body == framing::chunked) dec_ = chunked_decoder();
    ++served_;
    keep_alive_ = h.keep_alive && !(opts_.max_requests_per_connection && served_ >= opts_.max_requests_per_connection) &&
                  !(stopping_ && *stopping_);

    // A Content-Length over max_body_bytes is refused at the first read of the body
    // (read_body), not here: the handler may raise the limit for its route first.
    if (!normal) {
        send_error(400, "path above the root");
        return;
    }
    try {
        h_(req_, res_);
    } catch (const std::exception& e) {
        GLUON_LOG_RATE_LIMITED(error, std::chrono::seconds(1), "gluon: http handler for {} threw: {}",
                               h.target, e.what());
        fail_response();
    } catch (...) {
        GLUON_LOG_RATE_LIMITED(error, std::chrono::seconds(1), "gluon: http handler for {} threw", h.target);
        fail_response();
    }
    if (!res_.detached_ && !finish_body()) {
        keep_alive_ = false;
        must_linger_ = true;
    }
    if (body_error_ && !res_.head_sent_ && (body_error_ == EMSGSIZE || body_error_ == EPROTO || body_error_ == ETIMEDOUT)) {
        send_error(body_error_ == EMSGSIZE ? 413 : body_error_ == ETIMEDOUT ? 408 : 400, "bad request body");
        return;
    }
    if (res_.close_) keep_alive_ = false;
    if (res_.detached_) {
        // Aborted, or taken over: either way the answers to earlier pipelined requests are
        // whole and still buffered; lingering_close writes nothing for a detached connection.
        (void)flush();
        detached_ = true;
        return;
    }
    finish_response();
    if (opts_.access_log) log_access();
}

bool connection::finish_body() {
    if (body_done_ && !pending_) return !body_error_;
    if (body_error_) return false;
    // A body over the limit that the handler left unread is refused (413 unless its answer has
    // started), as when a Content-Length was checked before the handler ran, and not waited for.
    if (body_over_limit()) {
        body_error_ = EMSGSIZE;
        return false;
    }
    // The client may be waiting for a 100 Continue that will not come: do not wait for its body.
    if (req_.head_.expect_continue && !continue_sent_) return false;
    // The client stalled for as long as the handler would wait: waiting up to body_timeout more
    // for the rest would hold the handler's answer back (and then replace it with a 408).
    if (body_stalled_) return false;
    // The handler's answer waits for this: limits it raised for its own reads (a quiet stream's
    // body_timeout of forever) do not hold it longer than the server's own would.
    req_.body_timeout_ = std::min(req_.body_timeout_, opts_.body_timeout);
    req_.body_until_ = std::min(req_.body_until_, timeout_deadline(opts_.body_total_timeout));
    uint64_t drained = 0;
    for (;;) {
        auto n = read_body(t_discard, sizeof t_discard, forever);
        if (!n) return false;
        if (*n == 0) return true;
        drained += *n;
        if (drained > k_drain_limit) return false;
    }
}

// The handler's own timeout passed with the body unfinished: its answer goes out without waiting
// for the rest (finish_body), and the connection closes after it.
result<size_t> connection::stalled() {
    body_stalled_ = true;
    return errno_error(ETIMEDOUT);
}

// The request's limit, which its handler may have lowered below what came, or a declared length
// over it.
bool connection::body_over_limit() const noexcept {
    if (req_.head_.body == framing::length) return req_.head_.content_length > req_.max_body_;
    return dec_.total() > req_.max_body_;
}

result<size_t> connection::read_body(void* buf, size_t n, duration timeout) {
    if (body_error_) return errno_error(body_error_);
    // The caller's own timeout, when shorter, ends this read only: nothing was consumed, so the
    // body stays readable (body_timeout instead means the client stalled: the body is dead).
    // body_total_timeout bounds every read too, and its end kills the body as body_timeout's
    // does: a client sending a byte a little more often than body_timeout held its handler,
    // and so its connection's fiber, for as long as it liked.
    const bool own_timeout = timeout < req_.body_timeout_;
    const duration wait = own_timeout ? timeout : req_.body_timeout_;
    if (body_done_ && !pending_) return size_t{0};
    auto fail = [&](int e) -> result<size_t> {
        body_error_ = e;
        keep_alive_ = false;
        return errno_error(e);
    };
    // Before a 100 Continue: a client told to go on would send a body that is refused anyway.
    if (body_over_limit()) return fail(EMSGSIZE);
    if (req_.head_.expect_continue && !continue_sent_ && !res_.head_sent_) {
        continue_sent_ = true;
        out_ += "HTTP/1.1 100 Continue\r\n\r\n";
        if (!flush()) return errno_error(body_error_ = EPIPE);
    }
    if (req_.head_.body == framing::length) {
        size_t want = n < body_left_ ? n : static_cast<size_t>(body_left_);
        if (end_ > start_) {
            size_t k = want < end_ - start_ ? want : end_ - start_;
            std::memcpy(buf, in_ + start_, k);
            start_ += k;
            body_left_ -= k;
            body_done_ = body_left_ == 0;
            return k;
        }
        const duration left = timeout_left(wait, req_.body_until_);
        auto r = s_.read_some(buf, want, left);
        if (!r && own_timeout && left == wait && r.error().value() == ETIMEDOUT) return stalled();
        if (!r) return fail(r.error().value());
        if (*r == 0) return fail(ENODATA);
        body_left_ -= *r;
        body_done_ = body_left_ == 0;
        return *r;
    }
    for (;;) {  // chunked
        if (pending_) {
            size_t k = n < pending_ ? n : pending_;
            std::memcpy(buf, in_ + start_, k);
            start_ += k;
            pending_ -= k;
            return k;
        }
        if (body_done_) return size_t{0};
        auto st = dec_.next({in_ + start_, end_ - start_});
        if (st.error) return fail(EPROTO);
        start_ += st.consumed - st.data.size();
        if (!st.data.empty()) {
            if (dec_.total() > req_.max_body_) return fail(EMSGSIZE);
            pending_ = st.data.size();
            continue;
        }
        if (st.done) {
            body_done_ = true;
            return size_t{0};
        }
        // More input: move what is unread to just after the head, then read.
        if (start_ > head_end_) {
            std::memmove(in_ + head_end_, in_ + start_, end_ - start_);
            end_ -= start_ - head_end_;
            start_ = head_end_;
        }
        if (end_ == cap_) return fail(EPROTO);  // a chunk line longer than the room (cannot happen: 8 KiB > 4 KiB)
        const duration left = timeout_left(wait, req_.body_until_);
        auto r = s_.read_some(in_ + end_, cap_ - end_, left);
        if (!r && own_timeout && left == wait && r.error().value() == ETIMEDOUT) return stalled();
        if (!r) return fail(r.error().value());
        if (*r == 0) return fail(ENODATA);
        end_ += *r;
    }
}

void connection::append_head(response& res, bool chunked, uint64_t length) {
    if (stopping_ && *stopping_) keep_alive_ = false;  // a graceful stop began during the handler
    const size_t head_start = out_.size();
    out_ += "HTTP/1.1 ";
    append_number(out_, res.status_);
    out_ += ' ';
    out_ += reason_phrase(res.status_);
    out_ += "\r\n";
    if (!opts_.server_name.empty()) {
        out_ += "Server: ";
        out_ += opts_.server_name;
        out_ += "\r\n";
    }
    out_ += "Date: ";
    out_ += http_date_now();
    out_ += "\r\n";
    out_ += res.fields_;
    if (status_has_body(res.status_)) {
        if (chunked) {
            out_ += "Transfer-Encoding: chunked\r\n";
        } else if (length != UINT64_MAX) {
            out_ += "Content-Length: ";
            append_number(out_, length);
            out_ += "\r\n";
        }
    }
    if (!keep_alive_) out_ += "Connection: close\r\n";
    else if (req_.head_.version_minor == 0) out_ += "Connection: keep-alive\r\n";
    out_ += "\r\n";
    res.head_sent_ = true;
    response_bytes_ = out_.size() - head_start;  // the body's bytes are added as they are sent
}

void connection::write_head(response& res) {
    bool chunked = res.declared_length_ == UINT64_MAX && req_.head_.version_minor == 1;
    if (res.declared_length_ == UINT64_MAX && !chunked) keep_alive_ = false;  // ends at close
    res.chunked_ = chunked && status_has_body(res.status_);
    append_head(res, res.chunked_, res.declared_length_);
}

result<void> connection::write_body(response& r, std::string_view data) {
    if (!r.head_sent_) write_head(r);
    if (data.empty() || !body_allowed(r)) return {};
    if (!r.chunked_) return write_raw(data);
    char line[24];
    auto e = std::to_chars(line, line + 20, data.size(), 16);
    *e.ptr++ = '\r';
    *e.ptr++ = '\n';
    out_.append(line, static_cast<size_t>(e.ptr - line));
    return write_raw(data, "\r\n");
}

result<void> connection::finish_body(response& r, bool short_body) {
    if (!r.head_sent_) write_head(r);
    if (short_body && req_.head_.verb != method::head) {
        keep_alive_ = false;  // the client expects bytes that will not come
        return errno_error(EINVAL);
    }
    if (r.chunked_ && body_allowed(r)) {
        out_ += "0\r\n";
        out_ += r.trailers_;
        out_ += "\r\n";
    }
    return {};
}

result<void> connection::write_raw(std::string_view a, std::string_view b) {
    iovec v[3];
    int cnt = 0;
    if (!out_.empty()) v[cnt++] = {out_.data(), out_.size()};
    if (!a.empty()) v[cnt++] = {const_cast<char*>(a.data()), a.size()};
    if (!b.empty()) v[cnt++] = {const_cast<char*>(b.data()), b.size()};
    if (!cnt) return {};
    auto r = s_.writev_all(v, cnt, stall_timeout{opts_.send_timeout});
    out_.clear();
    if (!r) {
        keep_alive_ = false;
        return r;
    }
    return {};
}

bool connection::flush() {
    if (out_.empty()) return true;
    return static_cast<bool>(write_raw({}));
}

bool connection::body_allowed(const response& r) const noexcept {
    return req_.head_.verb != method::head && status_has_body(r.status_);
}

void connection::finish_response() {
    response& r = res_;
    bool head_only = req_.head_.verb == method::head;
    if (r.streaming_) {
        if (!r.finished_ && !r.finish()) keep_alive_ = false;
        response_bytes_ += r.streamed_;
    } else {
        using kind = response::body_kind;
        uint64_t len = r.kind_ == kind::file ? r.file_len_ : r.kind_ == kind::view ? r.body_view_.size() : r.body_.size();
        append_head(r, false, len);
        if (!head_only && status_has_body(r.status_)) {
            if (r.kind_ == kind::file) {
                if (!send_file(r)) keep_alive_ = false;
                else response_bytes_ += len;
            } else if (r.kind_ == kind::view && len >= k_always_copy_below &&
                       (len >= k_copy_body_below || end_ == start_)) {
                // Large, or nothing pipelined behind it (the output is written before the next
                // read anyway): head and body in one writev, without copying the body.
                if (!write_raw(r.body_view_)) keep_alive_ = false;
                else response_bytes_ += len;
            } else {
                out_ += r.kind_ == kind::view ? r.body_view_ : std::string_view(r.body_);
                response_bytes_ += len;
            }
        }
        r.release();  // the file or a cached body, now written
    }
    if (out_.size() >= k_flush_at) (void)flush();
}

bool connection::send_file(response& r) {
    // Corked, the head and the file leave in full-sized segments instead of the head alone and
    // then whatever fits each time the send buffer drains.
    net::socket_fd* sock = s_.socket();
    bool cork = sock && sock->set_option(IPPROTO_TCP, TCP_CORK, 1);
    bool ok = flush() && s_.send_file(r.file_fd_, r.file_off_, r.file_len_, stall_timeout{opts_.send_timeout});
    if (cork) (void)sock->set_option(IPPROTO_TCP, TCP_CORK, 0);
    return ok;
}

// The handler threw: a 500 if nothing of its response has left yet; otherwise the response is
// aborted (the connection closes without the last chunk), so the client cannot take the part
// that was sent for a whole body.
void connection::fail_response() {
    if (res_.head_sent_) res_.abort();
    else res_.reset(), res_.status(500);
}

void connection::send_error(int status, const char* why, bool parsed) {
    GLUON_LOG_RATE_LIMITED(debug, std::chrono::seconds(1), "gluon: http: {} ({})", status, why);
    keep_alive_ = false;
    must_linger_ = true;  // the client may still be sending what we refused
    res_.reset();
    res_.status(status);
    res_.content_type("text/plain");
    std::string body = std::to_string(status);
    body += ' ';
    body += reason_phrase(status);
    body += '\n';
    res_.body(body);
    append_head(res_, false, res_.body_.size());
    // (A request that failed to parse may hold the previous request's method: its error
    // answer always has its body.)
    if (!parsed || req_.head_.verb != method::head) out_ += res_.body_;
}

void connection::lingering_close() {
    if (detached_ || !flush()) return;
    // With nothing left unread, closing is clean. Otherwise send our FIN and read what the
    // client still sends for a moment, so that unread input does not make the kernel reset the
    // connection before the client has read our response.
    if (end_ == start_ && !must_linger_) return;
    if (!s_.shutdown(k_linger)) return;
    deadline_t d = deadline_after(k_linger);
    uint64_t drained = 0;
    while (drained < k_drain_limit) {
        auto n = s_.read_some(t_discard, sizeof t_discard, time_left(d));
        if (!n || *n == 0) break;
        drained += *n;
    }
}

void connection::wake_for_stop() noexcept {
    if (h2_ && !idle_) return h2_->refuse_new_streams();
    if (!idle_) return;
    if (net::socket_fd* sock = s_.socket()) (void)sys::shutdown(sock->get(), SHUT_RD);
}

void connection::log_access() {
    std::string peer = "-";
    if (net::socket_fd* sock = s_.socket())
        if (auto a = sock->peer_address()) peer = a->to_string();
    GLUON_INFO("{} - - [{}] \"{} {} HTTP/1.{}\" {} {}", peer, http_date_now(), req_.head_.method_name,
               req_.head_.target, req_.head_.version_minor, res_.status_, response_bytes_);
}

}  // namespace gluon::http::detail
