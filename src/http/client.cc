#include "gluon/http/client.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "chars.h"
#include "gluon/common/spinlock.h"
#include "h2/client_session.h"
#include "gluon/net/resolver.h"
#include "gluon/net/tls.h"
#include "gluon/runtime/fd.h"
#include "gluon/sys/ops.h"

namespace gluon::http {

std::string_view client_response::header(std::string_view name) const noexcept {
    for (const auto& [k, v] : headers)
        if (iequals(k, name)) return v;
    return {};
}

namespace {

struct connection {
    std::unique_ptr<net::byte_stream> s;
    std::unique_ptr<char[]> rbuf;  // receive buffer, kept with the connection
    size_t rcap = 0;
    std::string head;            // the request head being sent
    std::vector<header> fields;  // the response head's fields
    int64_t idle_since = 0;
    bool reused = false;
    bool h2 = false;  // HTTP/2 was negotiated (or is known): the connection becomes a session
    bool plain = false;  // no TLS: a request's writes watch the socket for an early answer
};

bool idempotent(method m) {
    return m == method::get || m == method::head || m == method::put || m == method::delete_ ||
           m == method::options || m == method::trace;
}

/// Errors that mean "the connection failed", after which an idempotent request may be retried.
bool connection_failure(const std::error_code& e) {
    return e == std::errc::connection_reset || e == std::errc::broken_pipe || e == std::errc::no_message_available ||
           e == std::errc::connection_aborted || e == std::errc::connection_refused;
}

/// Write errors that mean the server closed the connection, and may have answered first.
bool closed_by_peer(const std::error_code& e) {
    return e == std::errc::broken_pipe || e == std::errc::connection_reset;
}

}  // namespace

struct client::impl {
    client_options opts;
    net::tls::context default_tls;
    spinlock lock;
    // (vCPU thread, origin) -> idle connections, the most recent last.
    std::map<std::pair<std::thread::id, std::string>, std::vector<connection>> idle;
    // (vCPU thread, origin) -> the HTTP/2 connection that carries its requests.
    std::map<std::pair<std::thread::id, std::string>, std::shared_ptr<detail::h2_client_session>> h2;
    stats st;
    std::string last_url_, last_key_, last_text_;  // last_text_: last_parsed_.to_string()
    url last_parsed_;

    std::string pool_key(const url& u) const { return u.scheme + "://" + u.authority() + "|" + opts.proxy; }

    result<const net::tls::context*> tls_context() {
        if (opts.tls) return opts.tls;
        std::lock_guard g(lock);
        if (!default_tls.valid()) {
            net::tls::context_options o;
            o.alpn = opts.http2 ? std::vector<std::string>{"h2", "http/1.1"} : std::vector<std::string>{"http/1.1"};
            default_tls = GLUON_TRY(net::tls::context::make_client(o));
        }
        return &default_tls;
    }

    /// A pooled connection that is still fresh, or none. With `probe`, or once it has idled
    /// over a second, one that is also still healthy (no EOF, no unread bytes: see quiet()).
    /// Otherwise a connection the server has just closed fails the exchange before any
    /// answer, which the caller retries: for the idempotent requests it may retry, the check
    /// would cost every quick reuse a system call to save a rare retry. (A server that says
    /// something before it closes an idle connection, a 408, does so after its idle timeout,
    /// which is seconds.)
    std::optional<connection> take_idle(const std::string& key, bool probe) {
        constexpr int64_t k_unchecked_idle_ns = 1'000'000'000;
        auto now = mono_coarse_ns();  // idle ages need no precision
        for (;;) {
            connection c;
            {
                std::lock_guard g(lock);
                auto it = idle.find({std::this_thread::get_id(), key});
                if (it == idle.end() || it->second.empty()) return std::nullopt;
                c = std::move(it->second.back());
                it->second.pop_back();
            }
            bool fresh = now - c.idle_since < std::chrono::duration_cast<std::chrono::nanoseconds>(opts.idle_timeout).count();
            const bool check = probe || now - c.idle_since > k_unchecked_idle_ns;
            if (fresh && (!check || quiet(c))) {
                c.reused = true;
                return c;
            }
            (void)c.s->close();
        }
    }

    /// Nothing has come on an idle connection, not even its end: neither in the socket nor
    /// taken ahead of a read (connections read ahead), which a zero-timeout poll both sees.
    static bool quiet(connection& c) {
        net::socket_fd* sock = c.s->socket();
        if (!sock) return false;
        auto ready = fd::poll(sock->get(), POLLIN, duration::zero());
        return !ready && ready.error() == std::errc::timed_out;
    }

    void give_back(const std::string& key, connection c) {
        c.idle_since = mono_coarse_ns();
        c.reused = false;
        std::lock_guard g(lock);
        auto& v = idle[{std::this_thread::get_id(), key}];
        v.push_back(std::move(c));
        if (v.size() > opts.max_idle_per_origin) {
            (void)v.front().s->close();
            v.erase(v.begin());
        }
    }

    result<connection> open(const url& u, deadline_t total) {
        // One deadline for every step (resolution, TCP, a proxy's CONNECT, TLS): each step
        // given connect_timeout afresh would let the steps together take several.
        const deadline_t until = std::min(total, timeout_deadline(opts.connect_timeout));
        connection c;
        net::stream sock;
        if (!opts.proxy.empty()) {
            url p = GLUON_TRY(url::parse(opts.proxy));
            sock = GLUON_TRY(net::connect(p.host, p.port, timeout_left(until)));
        } else {
            sock = GLUON_TRY(net::connect(u.host, u.port, timeout_left(until)));
        }
        (void)sock.set_nodelay(true);
        if (!opts.proxy.empty() && u.scheme == "https") GLUON_TRY(tunnel(sock, u, until));
        // Read ahead (net::stream::read_ahead): a connection is used and closed on the vCPU
        // that opened it (the pool is per vCPU), and every read goes through its stream.
        sock.read_ahead();
        if (u.scheme == "https") {
            const net::tls::context* ctx = GLUON_TRY(tls_context());
            auto tls = GLUON_TRY(net::tls::stream::connect(std::move(sock), *ctx, u.host, timeout_left(until)));
            c.h2 = tls.alpn_selected() == "h2";
            c.s = std::make_unique<net::tls::stream>(std::move(tls));
        } else {
            c.h2 = opts.http2_prior_knowledge && opts.proxy.empty();
            c.plain = true;
            c.s = std::make_unique<net::stream>(std::move(sock));
        }
        std::lock_guard g(lock);
        ++st.connections_opened;
        return c;
    }

    /// CONNECT through the proxy; the socket then carries the TLS session to the origin. The
    /// proxy's answer must have come by `until`, however it trickles in.
    result<void> tunnel(net::stream& sock, const url& u, deadline_t until) {
        std::string hp = u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host;
        hp += ":" + std::to_string(u.port);
        std::string req = "CONNECT " + hp + " HTTP/1.1\r\nHost: " + hp + "\r\n\r\n";
        GLUON_TRY(sock.write_all(req.data(), req.size(), timeout_left(until)));
        std::string buf;
        std::vector<header> f(opts.limits.max_headers);
        response_head h;
        h.headers = f.data();
        size_t scanned = 0;
        char tmp[4096];
        for (;;) {
            // Read byte-wise past the head: what follows belongs to the TLS session.
            auto n = GLUON_TRY(sock.read_some(tmp, 1, timeout_left(until)));
            if (n == 0) return errno_error(ECONNRESET);
            buf.append(tmp, n);
            auto r = parse_response(buf, h, opts.limits, scanned, method::connect);
            if (r.state == parse_result::invalid) return errno_error(EPROTO);
            if (r.state == parse_result::complete) {
                if (h.status < 200 || h.status >= 300) return errno_error(ECONNREFUSED);
                return {};
            }
        }
    }

    /// The origin's HTTP/2 session on this vCPU, if one is open and takes new streams.
    std::shared_ptr<detail::h2_client_session> h2_session(const std::string& key) {
        std::lock_guard g(lock);
        auto it = h2.find({std::this_thread::get_id(), key});
        if (it == h2.end()) return nullptr;
        if (it->second->usable()) return it->second;
        h2.erase(it);
        return nullptr;
    }

    /// The request's fields for HTTP/2 (the pseudo-fields are the session's). Errors: EINVAL.
    result<std::vector<std::pair<std::string, std::string>>> h2_fields(const client_request& req, bool cross_origin) {
        std::vector<std::pair<std::string, std::string>> f;
        bool has_ua = false;
        for (const auto& [k, v] : req.headers) {
            if (iequals(k, "host") || iequals(k, "content-length") || iequals(k, "transfer-encoding")) continue;
            if (cross_origin && (iequals(k, "authorization") || iequals(k, "cookie") || iequals(k, "proxy-authorization"))) continue;
            if (k.empty() || k.find_first_of("\r\n:") != std::string::npos || v.find_first_of("\r\n") != std::string::npos ||
                k.find('\0') != std::string::npos || v.find('\0') != std::string::npos)
                return errno_error(EINVAL);
            has_ua |= iequals(k, "user-agent");
            f.emplace_back(k, v);
        }
        if (!has_ua && !opts.user_agent.empty()) f.emplace_back("user-agent", opts.user_agent);
        return f;
    }

    struct attempt {
        bool started = false;  // a response byte arrived: no retry
        bool keep = false;     // the connection may go back to the pool
        bool early = false;    // a final answer began before the request had gone: the rest was not sent
    };

    /// writev_all of a request's bytes which, on a plain socket, also watches for the answer
    /// while it waits for room: a server may answer before it has read the whole body (a 413,
    /// a 401, RFC 9112 9.5) and then wait, neither reading nor closing, which held the call in
    /// its write until read_timeout. Interim 1xx answers (a 100 Continue) are dropped and the
    /// writing goes on; once a final answer begins, at.early is set, the rest is not sent and
    /// what arrived is in c.rbuf[0, have). `first`: the request's first bytes, which a socket
    /// with nothing written on it yet has room for. Over TLS the socket is not watched: a
    /// record is written whole once begun, and a session ticket would look like an answer.
    /// Errors: those of writev_all, and of the reads of the answer.
    result<void> send_request(connection& c, iovec* v, int n, bool first, stall_timeout t, method verb,
                              size_t& have, attempt& at) {
        net::byte_stream& s = *c.s;
        if (!c.plain) return s.writev_all(v, n, t);
        const int fd = s.socket()->get();
        step_timeouts left(t);
        bool look = true;  // before waiting for room: a write usually leaves some
        for (;;) {
            if (!first) {
                // Room, or the answer. POLLERR and POLLHUP go on to the write, which reports them.
                for (;; look = false) {
                    auto ev = fd::poll(fd, POLLIN | POLLOUT, look ? duration::zero() : left.next());
                    if (!ev && !(look && ev.error() == std::errc::timed_out)) return unexpected(ev.error());
                    if (ev && (*ev & POLLIN)) {
                        at.early = GLUON_TRY(final_answer_begun(c, verb, left, have, at));
                        if (at.early) return {};
                    }
                    if (ev && (*ev & ~POLLIN)) break;
                }
            }
            first = false;
            size_t put = GLUON_TRY(s.writev(v, n, left.next()));
            if (put == 0) return errno_error(EPIPE);  // a transport that takes nothing would spin
            for (; n > 0 && put >= v->iov_len; ++v, --n) put -= v->iov_len;
            if (n == 0) return {};
            v->iov_base = static_cast<char*>(v->iov_base) + put;
            v->iov_len -= put;
            look = false;  // a short write: the socket is full
        }
    }

    /// Reads what arrived while the request was being written, up to the end of a response
    /// head. True when it is a final answer's (or the stream ended, or the bytes are no head:
    /// the caller's reading of the head reports those); interim answers are dropped, and with
    /// nothing after them the answer is false: the writing goes on. Errors: those of read_some.
    result<bool> final_answer_begun(connection& c, method verb, step_timeouts& left, size_t& have, attempt& at) {
        char* rb = c.rbuf.get();
        response_head h;
        h.headers = c.fields.data();
        for (;;) {
            if (have == c.rcap) return true;
            const size_t n = GLUON_TRY(c.s->read_some(rb + have, c.rcap - have, left.next()));
            if (n == 0) return true;
            at.started = true;
            have += n;
            for (;;) {
                size_t scanned = 0;
                auto r = parse_response({rb, have}, h, opts.limits, scanned, verb);
                if (r.state == parse_result::invalid) return true;
                if (r.state != parse_result::complete) break;  // the rest of the head is coming
                if (h.status < 100 || h.status >= 200 || h.status == 101) return true;
                std::memmove(rb, rb + r.consumed, have - r.consumed);
                have -= r.consumed;
                if (have == 0) return false;
            }
        }
    }

    result<void> exchange(connection& c, const url& u, const client_request& req, bool with_body,
                          bool cross_origin, method verb,
                          deadline_t total, const std::function<bool(std::string_view)>* on_body,
                          client_response& out, attempt& at) {
        net::byte_stream& s = *c.s;
        duration rt = opts.read_timeout;
        // The head.
        std::string& head = c.head;  // the connection's: reused, and never shared across a wait
        head.assign(method_name(verb).empty() ? "GET" : method_name(verb));
        head += ' ';
        head += !opts.proxy.empty() && u.scheme == "http" ? u.to_string() : u.target;
        head += " HTTP/1.1\r\nHost: ";
        head += u.authority();
        head += "\r\n";
        bool has_ua = false;
        for (const auto& [k, v] : req.headers) {
            // (send() checked the names: none is "Transfer-Encoding " that these would miss.)
            if (iequals(k, "host") || iequals(k, "content-length") || iequals(k, "transfer-encoding")) continue;
            // Credentials are not sent on to another origin after a redirect.
            if (cross_origin && (iequals(k, "authorization") || iequals(k, "cookie") || iequals(k, "proxy-authorization"))) continue;
            has_ua |= iequals(k, "user-agent");
            head += k + ": " + v + "\r\n";
        }
        if (!has_ua && !opts.user_agent.empty()) head += "User-Agent: " + opts.user_agent + "\r\n";
        bool streamed = with_body && req.body_source;
        if (streamed) head += "Transfer-Encoding: chunked\r\n";
        else if (with_body && (!req.body.empty() || verb == method::post || verb == method::put || verb == method::patch))
            head += "Content-Length: " + std::to_string(req.body.size()) + "\r\n";
        head += "\r\n";
        iovec v[2] = {{head.data(), head.size()}, {const_cast<char*>(req.body.data()), with_body && !streamed ? req.body.size() : 0}};
        // The connection's receive buffer holds the response head and whatever followed it; a
        // body goes from there straight to its destination. An answer may begin to arrive
        // while the request is still being written (send_request).
        if (!c.rbuf) {
            c.rcap = opts.limits.max_head_bytes + 1 > 16 * 1024 ? opts.limits.max_head_bytes + 1 : 16 * 1024;
            c.rbuf.reset(new char[c.rcap]);
        }
        char* rb = c.rbuf.get();
        size_t have = 0, pos = 0;  // bytes in rb; where the unparsed part starts
        c.fields.resize(opts.limits.max_headers);
        response_head h;
        h.headers = c.fields.data();
        // read_timeout bounds each wait for the server to take more, not the whole upload (a
        // large body to a slow but steady server); only total_timeout bounds all of it.
        const stall_timeout wt{rt, total};
        auto wrote = send_request(c, v, v[1].iov_len ? 2 : 1, true, wt, verb, have, at);
        while (wrote && streamed && !at.early) {
            char chunk[16 * 1024];
            size_t n = GLUON_TRY(req.body_source(chunk, sizeof chunk));
            char line[24];
            auto r = std::to_chars(line, line + 20, n, 16);
            *r.ptr++ = '\r';
            *r.ptr++ = '\n';
            iovec cv[3] = {{line, static_cast<size_t>(r.ptr - line)}, {chunk, n}, {const_cast<char*>("\r\n"), 2}};
            wrote = send_request(c, cv, 3, false, wt, verb, have, at);
            if (n == 0) break;
        }
        // A server may answer before it has the whole body (a 413, a 401) and close the
        // connection (RFC 9112 9.5): the write then fails, but its answer has arrived and is the
        // call's. It is looked for only once a write failed, so the common case pays nothing.
        // (One that answers and waits instead is seen by send_request: at.early.)
        std::error_code cut;  // the request's write failed so: an answer may still be read
        if (!wrote) {
            if (!closed_by_peer(wrote.error())) return wrote;
            cut = wrote.error();
        }

        // The response head, skipping interim 1xx answers.
        for (size_t scanned = 0;;) {
            auto r = parse_response({rb + pos, have - pos}, h, opts.limits, scanned, verb);
            if (r.state == parse_result::invalid) return errno_error(EPROTO);
            if (r.state == parse_result::complete) {
                pos += r.consumed;
                if (h.status >= 100 && h.status < 200 && h.status != 101) {
                    scanned = 0;
                    continue;
                }
                break;
            }
            if (pos > 0) {
                std::memmove(rb, rb + pos, have - pos);
                have -= pos;
                pos = 0;
            }
            if (have == c.rcap) return errno_error(EPROTO);  // cannot happen: the parser's limit is lower
            auto got_bytes = s.read_some(rb + have, c.rcap - have, timeout_left(rt, total));
            // No answer came before the server closed: the failed write is the exchange's error.
            if (cut && have == 0 && (!got_bytes || *got_bytes == 0)) return unexpected(cut);
            auto n = GLUON_TRY(std::move(got_bytes));
            if (n == 0) return errno_error(have == 0 ? ENODATA : EPROTO);
            at.started = true;
            have += n;
        }
        out.status = h.status;
        out.reason.assign(h.reason);
        // Assigned over the fields already there: a reused response keeps their buffers.
        out.headers.resize(h.header_count);
        for (size_t i = 0; i < h.header_count; ++i) {
            out.headers[i].first.assign(h.headers[i].name);
            out.headers[i].second.assign(h.headers[i].value);
        }
        out.body.clear();
        out.body_length = 0;
        if (req.on_head && !req.on_head(out)) return errno_error(ECANCELED);

        // The body. A redirect's is not the one the caller's buffer is for, and one the call
        // follows is not the caller's at all: the next answer replaces it, so it is read off the
        // connection and dropped, reaching neither on_body nor out.body. Kept, it took memory
        // for nothing, and a caller that streams bodies with max_body_bytes off (the HTTP
        // filesystem) held whatever size a server sent, or claimed up front.
        const bool skip = follows(out, req, verb, with_body);
        if (skip) on_body = nullptr;
        uint64_t got = 0;
        char* sink = on_body || (h.status >= 300 && h.status < 400) ? nullptr : req.body_into;
        const uint64_t sink_cap = req.body_into_size;
        auto deliver = [&](std::string_view piece) -> result<void> {
            if (sink && got + piece.size() > sink_cap) return errno_error(EMSGSIZE);
            if (sink && !piece.empty()) std::memcpy(sink + got, piece.data(), piece.size());
            got += piece.size();
            out.body_length = got;
            if (got > opts.max_body_bytes) return errno_error(EMSGSIZE);
            if (on_body) {
                if (!(*on_body)(piece)) return errno_error(ECANCELED);
            } else if (!sink && !skip) {
                out.body.append(piece);
            }
            return {};
        };
        // Refills rb after what is unconsumed; returns the bytes read (0: the peer closed).
        auto more = [&]() -> result<size_t> {
            if (pos > 0) {
                std::memmove(rb, rb + pos, have - pos);
                have -= pos;
                pos = 0;
            }
            if (have == c.rcap) return errno_error(EPROTO);
            auto n = GLUON_TRY(s.read_some(rb + have, c.rcap - have, timeout_left(rt, total)));
            have += n;
            return n;
        };
        if (h.body == framing::length) {
            if (h.content_length > opts.max_body_bytes || (sink && h.content_length > sink_cap))
                return errno_error(EMSGSIZE);
            uint64_t left = h.content_length;
            size_t take = have - pos < left ? have - pos : static_cast<size_t>(left);
            GLUON_TRY(deliver({rb + pos, take}));
            pos += take;
            left -= take;
            if (!on_body && !skip && left > 0) {
                // The rest goes straight into the body: no copy through the receive buffer.
                char* end;
                if (sink) {
                    end = sink + got + left;
                } else {
                    size_t at_ = out.body.size();
                    out.body.resize(at_ + left);
                    end = out.body.data() + out.body.size();
                }
                while (left > 0) {
                    auto n = GLUON_TRY(s.read_some(end - left, left, timeout_left(rt, total)));
                    if (n == 0) return errno_error(ENODATA);
                    left -= n;
                    got += n;
                    out.body_length = got;
                }
            }
            while (left > 0) {
                if (GLUON_TRY(more()) == 0) return errno_error(ENODATA);
                take = have - pos < left ? have - pos : static_cast<size_t>(left);
                GLUON_TRY(deliver({rb + pos, take}));
                pos += take;
                left -= take;
            }
        } else if (h.body == framing::chunked) {
            chunked_decoder d;
            for (;;) {
                auto st = d.next({rb + pos, have - pos});
                if (st.error) return errno_error(EPROTO);
                GLUON_TRY(deliver(st.data));
                pos += st.consumed;
                if (st.done) break;
                if (st.consumed == 0 && GLUON_TRY(more()) == 0) return errno_error(ENODATA);
            }
        } else if (h.body == framing::to_close) {
            for (;;) {
                GLUON_TRY(deliver({rb + pos, have - pos}));
                pos = have;
                if (GLUON_TRY(more()) == 0) break;
            }
        }
        at.keep = !cut && !at.early && h.keep_alive && h.body != framing::to_close && pos == have && h.status != 101;
        return {};
    }

    /// The request that follows a redirect: 303 turns it into a retrieval, and 301 and 302 a
    /// POST into a GET (RFC 9110 15.4.2-4); a HEAD is a retrieval already, and a GET would
    /// fetch the body it did not ask for. Other methods go again as they were, body included.
    static void redirected(int status, method& verb, bool& with_body) {
        if (verb != method::head && (status == 303 || ((status == 301 || status == 302) && verb == method::post))) {
            verb = method::get;
            with_body = false;
        }
    }

    /// Whether the call goes on from `out`, whose head has arrived, to its Location (or fails
    /// with ELOOP past max_redirects). Not when the next request would carry a streamed body:
    /// body_source has been read to its end, and calling it again would send another body (an
    /// empty one, or whatever it gives) as if it were the request's; the redirect is the answer.
    bool follows(const client_response& out, const client_request& req, method verb, bool with_body) const {
        const int s = out.status;
        if ((s != 301 && s != 302 && s != 303 && s != 307 && s != 308) || opts.max_redirects == 0 ||
            out.header("Location").empty())
            return false;
        redirected(s, verb, with_body);
        return !(with_body && req.body_source);
    }

    // Fills `out`, whose buffers (fields, body, URL) are reused when a caller passes the same
    // response again.
    /// The caller's fields, checked before anything is sent over either protocol: a name that
    /// is not a token ("Transfer-Encoding " with its space) would not be recognised as one of
    /// the fields the client sets itself, and would reach a server that may read it as one (a
    /// second framing); CR, LF and NUL in a value would inject fields.
    static bool valid_fields(const client_request& req) {
        for (const auto& [k, v] : req.headers)
            if (k.empty() || !std::all_of(k.begin(), k.end(), detail::is_tchar) ||
                v.find_first_of("\r\n") != std::string::npos || v.find('\0') != std::string::npos)
                return false;
        return true;
    }

    result<void> send(const client_request& req, const std::function<bool(std::string_view)>* on_body,
                      client_response& out) {
        if (!valid_fields(req)) return errno_error(EINVAL);
        deadline_t total = timeout_deadline(opts.total_timeout);
        if (req.timeout != forever) total = std::min(total, timeout_deadline(req.timeout));
        url u;
        std::string key;
        {  // A client usually fetches the same URLs again: the last one is kept parsed.
            std::lock_guard g(lock);
            if (req.url == last_url_) {
                u = last_parsed_;
                key = last_key_;
                out.url.assign(last_text_);  // the URL that answers unless redirected
            }
        }
        if (key.empty()) {
            u = GLUON_TRY(url::parse(req.url));
            key = pool_key(u);
            std::lock_guard g(lock);
            last_url_ = req.url;
            last_parsed_ = u;
            last_key_ = key;
            last_text_ = u.to_string();
            out.url.assign(last_text_);
        }
        std::string first_origin;  // kept once a redirect changes the origin's key
        method verb = req.method;
        bool with_body = true;
        out.status = 0;
        out.body.clear();
        out.body_length = 0;
        // HTTP/2 hands the body over in pieces, through a callback: to on_body, or into the
        // caller's buffer. As over HTTP/1.1, a redirect the call follows has its body dropped,
        // and one it does not follow has it in out.body rather than in the buffer (whose size
        // was chosen for the resource asked for). body_length counts the pieces wherever they
        // go.
        std::function<bool(std::string_view)> h2_body;
        bool overflowed = false;
        if (on_body || req.body_into) {
            h2_body = [&](std::string_view piece) {
                if (follows(out, req, verb, with_body)) {
                    out.body_length += piece.size();
                    return true;
                }
                if (on_body) {
                    out.body_length += piece.size();
                    return (*on_body)(piece);
                }
                if (out.status >= 300 && out.status < 400) {  // (the session checks max_body_bytes)
                    out.body.append(piece);
                    out.body_length += piece.size();
                    return true;
                }
                if (out.body_length + piece.size() > req.body_into_size) {
                    overflowed = true;
                    return false;
                }
                std::memcpy(req.body_into + out.body_length, piece.data(), piece.size());
                out.body_length += piece.size();
                return true;
            };
        }
        const std::function<bool(std::string_view)>* h2_on_body = h2_body ? &h2_body : nullptr;
        for (int redirects = 0;; ++redirects) {
            int retries_left = idempotent(verb) && !req.body_source ? opts.retries : 0;
            // A request the server refused unprocessed (RFC 9113 8.7) goes again whatever its
            // method; a streamed body cannot be read again.
            int refused_left = req.body_source ? 0 : opts.retries;
            if (redirects > 0) {
                if (redirects == 1) first_origin = key;
                key = pool_key(u);
                out.url = u.to_string();  // before the exchange: on_head sees which URL answers
            }
            bool cross_origin = redirects > 0 && key != first_origin;
            for (;;) {
                if (auto h2s = h2_session(key)) {
                    auto fields = GLUON_TRY(h2_fields(req, cross_origin));
                    std::string_view name = method_name(verb).empty() ? std::string_view("GET") : method_name(verb);
                    bool started = false, refused = false;
                    out.body_length = 0;
                    auto r = h2s->exchange(name, u, req, with_body, fields, opts.max_body_bytes, opts.read_timeout,
                                           total, h2_on_body, out, started, refused);
                    if (!r && overflowed) return errno_error(EMSGSIZE);  // the body did not fit the caller's buffer
                    if (r && !h2_on_body) out.body_length = out.body.size();
                    {
                        std::lock_guard g(lock);
                        ++st.http2_requests;
                    }
                    if (!r) {
                        const bool again = refused ? refused_left-- > 0
                                                   : !started && !h2s->usable() && connection_failure(r.error()) &&
                                                         retries_left-- > 0;
                        if (again) {
                            std::lock_guard g(lock);
                            ++st.retries;
                            continue;
                        }
                        return unexpected(r.error());
                    }
                    break;
                }
                auto pooled = take_idle(key, retries_left <= 0);
                connection c;
                if (pooled) {
                    c = std::move(*pooled);
                } else {
                    auto fresh = open(u, total);
                    if (!fresh) {
                        if (retries_left-- > 0 && connection_failure(fresh.error())) continue;
                        return unexpected(fresh.error());
                    }
                    c = std::move(*fresh);
                }
                if (c.h2) {
                    // HTTP/2: the connection becomes the origin's session (one per vCPU; a
                    // fiber that raced this one to open it keeps its own for this request).
                    auto sess = detail::h2_client_session::start(std::move(c.s), opts.read_timeout, opts.limits,
                                                                 opts.http2_ping_after, opts.http2_ping_timeout);
                    if (!sess) return unexpected(sess.error());
                    std::lock_guard g(lock);
                    auto& slot = h2[{std::this_thread::get_id(), key}];
                    if (slot && slot->usable()) (*sess)->close();
                    else slot = std::move(*sess);
                    continue;
                }
                if (c.reused) {
                    std::lock_guard g(lock);
                    ++st.connections_reused;
                }
                attempt at;
                auto r = exchange(c, u, req, with_body, cross_origin, verb, total, on_body, out, at);
                if (!r) {
                    (void)c.s->close();
                    // Nothing came back on a connection that failed: the request may be sent again.
                    if (!at.started && connection_failure(r.error()) && retries_left-- > 0) {
                        std::lock_guard g(lock);
                        ++st.retries;
                        continue;
                    }
                    return unexpected(r.error());
                }
                if (at.keep) give_back(key, std::move(c));
                else (void)c.s->close();
                break;
            }
            if (!follows(out, req, verb, with_body)) return {};
            if (redirects == opts.max_redirects) return errno_error(ELOOP);
            url next = GLUON_TRY(u.resolve(out.header("Location")));
            redirected(out.status, verb, with_body);
            u = std::move(next);
        }
    }
};

client::client(client_options opts) : impl_(std::make_unique<impl>()) { impl_->opts = std::move(opts); }

client::~client() {
    // Pooled connections of other vCPUs are closed here too. They read ahead: one that still
    // has a receive armed on its own vCPU leaves the kernel's socket open until something
    // arrives on it (its server closing it, at the latest) or that vCPU ends.
    for (auto& [k, v] : impl_->idle)
        for (auto& c : v) (void)c.s->close();
    // Sessions are closed on their own vCPU: those of this one now, the others by their writer
    // (h2_client_session::close asks it). Left to their server, those stayed open, with their
    // fibers and buffers, until it closed them.
    for (auto& [k, sess] : impl_->h2) sess->close();
}

result<client_response> client::send(const client_request& req) {
    client_response out;
    GLUON_TRY(impl_->send(req, nullptr, out));
    return out;
}

result<void> client::send(const client_request& req, client_response& out) { return impl_->send(req, nullptr, out); }

result<client_response> client::send(const client_request& req, const std::function<bool(std::string_view)>& on_body) {
    client_response out;
    GLUON_TRY(impl_->send(req, &on_body, out));
    return out;
}

result<void> client::send(const client_request& req, client_response& out,
                          const std::function<bool(std::string_view)>& on_body) {
    return impl_->send(req, &on_body, out);
}

result<client_response> client::get(std::string_view u) {
    client_request r;
    r.url = std::string(u);
    return send(r);
}

client::stats client::statistics() const noexcept {
    std::lock_guard g(impl_->lock);
    stats s = impl_->st;
    for (const auto& [k, v] : impl_->idle) s.idle += v.size();
    return s;
}

}  // namespace gluon::http
