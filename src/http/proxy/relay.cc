#include "relay.h"

#include <charconv>
#include <cstring>
#include <system_error>

#include "gluon/common/log.h"

namespace gluon::http::detail {

namespace {

constexpr size_t k_chunk_room = 32;  // a chunk's size line and CRLFs around the data

relay_outcome client_failure() {
    relay_outcome r;
    r.end = relay_outcome::client_failed;
    return r;
}

relay_outcome upstream_failure(int error, bool answered, bool retryable) {
    relay_outcome r;
    r.end = relay_outcome::upstream_failed;
    r.error = error;
    r.answered = answered;
    r.retryable = retryable;
    return r;
}

/// Sends the head (if not sent yet) and one piece of the body, framed; n == 0 ends the body.
/// The timeout bounds each wait for the upstream to take more, not the piece: a slow but steady
/// upstream takes a piece of any size (buffer_bytes may be large).
result<void> send_piece(net::stream& s, std::string_view& head, const char* data, size_t n,
                        upstream_body body, stall_timeout timeout) {
    iovec v[5];
    int k = 0;
    char line[24];
    if (!head.empty()) v[k++] = {const_cast<char*>(head.data()), head.size()};
    if (n > 0) {
        if (body == upstream_body::chunked) {
            auto e = std::to_chars(line, line + 20, n, 16);
            *e.ptr++ = '\r';
            *e.ptr++ = '\n';
            v[k++] = {line, static_cast<size_t>(e.ptr - line)};
        }
        v[k++] = {const_cast<char*>(data), n};
        if (body == upstream_body::chunked) v[k++] = {const_cast<char*>("\r\n"), 2};
    } else if (body == upstream_body::chunked) {
        v[k++] = {const_cast<char*>("0\r\n\r\n"), 5};
    }
    head = {};
    if (k == 0) return {};
    // One writev is the common case; its timeout counts from when it waits, so no clock is read.
    size_t want = 0;
    for (int i = 0; i < k; ++i) want += v[i].iov_len;
    size_t put = GLUON_TRY(s.writev(v, k, timeout.gap));
    if (put == want) return {};
    if (put == 0) return errno_error(EPIPE);
    int i = 0;
    while (put >= v[i].iov_len) put -= v[i++].iov_len;
    v[i].iov_base = static_cast<char*>(v[i].iov_base) + put;
    v[i].iov_len -= put;
    return s.writev_all(v + i, k - i, timeout);
}

}  // namespace

void answer_failure(response& res, int error) {
    res.status(error == ETIMEDOUT ? 504 : 502);
    res.content_type("text/plain");
    res.body(error == ETIMEDOUT ? "upstream timed out\n" : "bad gateway\n");
}

void log_failure(std::string_view upstream, int error) {
    GLUON_LOG_RATE_LIMITED(warn, std::chrono::seconds(1), "gluon: proxy: upstream {}: {}", upstream,
                           std::generic_category().message(error));
}

bool body_refused(request& req) {
    if (req.head().body != framing::length || req.content_length() <= req.max_body_bytes()) return false;
    char b;
    (void)req.read_body(&b, 1);  // EMSGSIZE, and the server's 413
    return true;
}

relay_outcome relay(upstream_conn& c, request& req, response& res, const request_line& line,
                    const proxy_common_options& o) {
    const method verb = req.method();
    const upstream_body body = !req.has_body()                  ? upstream_body::none
                               : req.head().body == framing::length ? upstream_body::length
                                                                    : upstream_body::chunked;
    c.head.clear();
    append_request_head(c.head, req, line, body, o);
    char* const b = c.buf.get();
    const size_t room = c.cap - k_chunk_room;

    // The request: its head leaves with the body's first piece; the body follows piece by piece.
    // An upstream may answer before it has the whole body (a 413, a 401) and close (RFC 9112
    // 9.5): the write fails, but the answer has arrived, and it is relayed. It is looked for
    // only after such a failed write: a request costs no extra system call.
    std::string_view head = c.head;
    int cut = 0;  // the request's write failed so (EPIPE, ECONNRESET): an answer may be read
    for (size_t n = 0;;) {
        if (body != upstream_body::none) {
            auto r = req.read_body(b, room);
            if (!r) return client_failure();
            n = *r;
        }
        if (auto w = send_piece(c.sock, head, b, n, body, stall_timeout{o.send_timeout}); !w) {
            const int e = w.error().value();
            if (e != EPIPE && e != ECONNRESET) return upstream_failure(e, false, body == upstream_body::none);
            cut = e;
            break;
        }
        if (n == 0) break;
    }

    // The response's head, past interim answers.
    if (c.fields.size() != o.limits.max_headers) c.fields.resize(o.limits.max_headers);
    response_head h;
    h.headers = c.fields.data();
    size_t have = 0, pos = 0;
    for (size_t scanned = 0;;) {
        auto p = parse_response({b + pos, have - pos}, h, o.limits, scanned, verb);
        if (p.state == parse_result::invalid) return upstream_failure(EPROTO, false, false);
        if (p.state == parse_result::complete) {
            pos += p.consumed;
            if (h.status == 101) return upstream_failure(EPROTO, false, false);  // Upgrade was not sent
            if (h.status >= 100 && h.status < 200) {
                scanned = 0;
                continue;
            }
            break;
        }
        if (pos > 0) {
            std::memmove(b, b + pos, have - pos);
            have -= pos;
            pos = 0;
        }
        if (have == c.cap) return upstream_failure(EPROTO, false, false);
        auto n = c.sock.read_some(b + have, c.cap - have, o.read_timeout);
        // No answer came before the upstream closed: the failed write is the exchange's error.
        if (cut && have == 0 && (!n || *n == 0)) return upstream_failure(cut, false, body == upstream_body::none);
        if (!n) return upstream_failure(n.error().value(), false, have == 0 && body == upstream_body::none);
        if (*n == 0) return upstream_failure(have == 0 ? ECONNRESET : EPROTO, false, have == 0 && body == upstream_body::none);
        have += *n;
    }
    if (cut) h.keep_alive = false;  // the connection is broken
    res.status(h.status);
    c.head.clear();
    append_response_fields(c.head, h, o);
    res.header_lines(c.head);

    relay_outcome ok;
    auto upstream_broke = [&](int e) {
        res.abort();
        return upstream_failure(e, true, false);
    };
    if (verb == method::head) {
        // No body follows; the length a GET would get is passed on. Without one the head goes
        // out as a streamed body's, with no length either (chunked to an HTTP/1.1 client, as
        // a GET's body would be relayed): a response left as it is would say Content-Length: 0.
        std::string_view cl = h.find("content-length");
        uint64_t len = 0;
        if (!cl.empty() && std::from_chars(cl.data(), cl.data() + cl.size(), len).ec == std::errc())
            res.content_length(len);
        else if (!res.write({}))
            return client_failure();
        if (!res.finish()) return client_failure();
        ok.keep = h.keep_alive && pos == have;
        return ok;
    }
    if (h.body == framing::none) {
        ok.keep = h.keep_alive && pos == have;
        return ok;
    }
    if (h.body == framing::length) {
        uint64_t left = h.content_length;
        if (have - pos >= left) {  // all here: sent with the head, from the buffer
            res.body({b + pos, static_cast<size_t>(left)}, c.buf);
            pos += left;
            ok.keep = h.keep_alive && pos == have;
            return ok;
        }
        res.content_length(left);
        if (have > pos && !res.write({b + pos, have - pos})) return client_failure();
        left -= have - pos;
        while (left > 0) {
            auto n = c.sock.read_some(b, left < c.cap ? left : c.cap, o.read_timeout);
            if (!n) return upstream_broke(n.error().value());
            if (*n == 0) return upstream_broke(ECONNRESET);
            if (!res.write({b, *n})) return client_failure();
            left -= *n;
        }
        if (!res.finish()) return client_failure();
        ok.keep = h.keep_alive;
        return ok;
    }
    if (h.body == framing::chunked) {
        chunked_decoder d;
        for (;;) {
            auto st = d.next({b + pos, have - pos});
            if (st.error) return upstream_broke(EPROTO);
            if (!st.data.empty() && !res.write(st.data)) return client_failure();
            pos += st.consumed;
            if (st.done) break;
            if (st.consumed == 0) {
                if (pos > 0) {
                    std::memmove(b, b + pos, have - pos);
                    have -= pos;
                    pos = 0;
                }
                if (have == c.cap) return upstream_broke(EPROTO);
                auto n = c.sock.read_some(b + have, c.cap - have, o.read_timeout);
                if (!n) return upstream_broke(n.error().value());
                if (*n == 0) return upstream_broke(ECONNRESET);
                have += *n;
            }
        }
        if (!res.finish()) return client_failure();
        ok.keep = h.keep_alive && pos == have;
        return ok;
    }
    // Delimited by the upstream closing.
    if (have > pos && !res.write({b + pos, have - pos})) return client_failure();
    for (;;) {
        auto n = c.sock.read_some(b, c.cap, o.read_timeout);
        if (!n) return upstream_broke(n.error().value());
        if (*n == 0) break;
        if (!res.write({b, *n})) return client_failure();
    }
    if (!res.finish()) return client_failure();
    return ok;
}

}  // namespace gluon::http::detail
