// An HTTP/1.1 and HTTP/2 client for fibers: a keep-alive connection pool per origin (and vCPU), bounded
// redirects, retries of idempotent requests on a connection that failed before answering,
// connect/read/total timeouts, chunked and streamed bodies both ways, HTTPS with verification on
// by default, and HTTP proxies (absolute-form requests; CONNECT tunnels for HTTPS). Over HTTP/2
// (chosen by ALPN for https://, or by prior knowledge for http://) one connection per origin and
// vCPU carries every fiber's requests at once, each on its own stream.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/http/parser.h"

namespace gluon::net::tls {
class context;
}

namespace gluon::http {

struct client_options {
    duration connect_timeout = std::chrono::seconds(10);  // all of name resolution, TCP, a proxy's
                                                          // CONNECT and the TLS handshake
    duration read_timeout = std::chrono::seconds(30);     // between reads of a response, and
                                                          // between writes of a request's body
    duration total_timeout = std::chrono::minutes(2);     // the whole call, redirects included
    int max_redirects = 5;                                // 0: redirects are returned, not followed
    // Idempotent requests: new attempts after a connection failed before answering. Such a
    // request takes a connection that was pooled under a second without checking it (a system
    // call), since one the server closed meanwhile fails before answering; others check first.
    // Over HTTP/2, a request the server refused before processing it (RST_STREAM
    // REFUSED_STREAM, or a stream above the last one its GOAWAY names, RFC 9113 8.7) gets as
    // many whatever its method, its body sent whole again (a body_source's cannot be).
    int retries = 1;
    size_t max_idle_per_origin = 8;
    duration idle_timeout = std::chrono::seconds(30);  // an idle pooled connection older is closed
    uint64_t max_body_bytes = 64 << 20;                // a response body over it: EMSGSIZE
    http::limits limits;                               // for response heads (both versions)
    /// For https:// URLs; nullptr: a default context verifying against the system's CAs.
    const net::tls::context* tls = nullptr;
    /// "http://host:port" of an HTTP proxy; empty: none.
    std::string proxy;
    std::string user_agent = "gluon";
    /// Offer HTTP/2 ("h2" before "http/1.1" in ALPN) to https:// origins; a context given in
    /// `tls` offers what its own alpn says.
    bool http2 = true;
    /// Speak HTTP/2 to http:// origins without asking first (h2c by prior knowledge, RFC 9113
    /// 3.3): for servers known to accept it. Not through a proxy.
    bool http2_prior_knowledge = false;
    /// HTTP/2: once a call has waited this long for its answer with nothing at all coming on its
    /// connection, the client sends a PING; if nothing comes back within http2_ping_timeout
    /// either, the connection is dead: its calls fail with ETIMEDOUT and later ones go on a new
    /// connection. A server that stopped answering without closing held each call for
    /// read_timeout, and its connection took every new one. An idle connection is not pinged;
    /// one timer per connection, none per call. forever: no PINGs.
    duration http2_ping_after = std::chrono::seconds(10);
    duration http2_ping_timeout = std::chrono::seconds(10);
};

struct client_response {
    int status = 0;
    std::string reason;
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;  // empty when streamed to a callback
    std::string url;   // the URL that answered (after redirects; set when on_head is called)
    uint64_t body_length = 0;  // the body's bytes, wherever they went
    /// The first field of that name (case-insensitive), or empty.
    std::string_view header(std::string_view name) const noexcept;
};

struct client_request {
    http::method method = method::get;
    std::string url;
    /// Extra fields. A name must be a token (RFC 9110 5.1: no space, colon, CR or LF) and a
    /// value may not hold CR, LF or NUL: send() fails with EINVAL otherwise. Host,
    /// Content-Length and Transfer-Encoding are the client's own and are skipped.
    std::vector<std::pair<std::string, std::string>> headers;
    std::string body;
    /// A body streamed with chunked coding instead of `body`: called until it returns 0 (or an
    /// error). A streamed request is never retried or redirected with its body: a redirect
    /// that would send it again (307, 308; 301 and 302 but for a POST, which becomes a GET) is
    /// the call's answer.
    std::function<result<size_t>(char* buf, size_t n)> body_source;
    /// A limit for this call (redirects and retries included) within client_options'
    /// total_timeout; forever: that one alone.
    duration timeout = forever;
    /// A buffer the response body is read straight into instead of client_response::body (over
    /// HTTP/1.1 from the socket, with no copy through the receive buffer); the response's
    /// body_length says how many bytes arrived. A longer body: EMSGSIZE. Not used by the
    /// send() that streams to a callback. A 3xx answer that is the call's (redirects off, no
    /// Location, a streamed body it would send again) is not what the buffer is for: its body
    /// goes to client_response::body, within max_body_bytes, over both protocols.
    char* body_into = nullptr;
    size_t body_into_size = 0;
    /// Called with each response's status and fields (a redirect's too) before its body is
    /// read; returning false ends the call there (ECANCELED) and closes the connection. For a
    /// caller that judges the head before taking the body: a Range request answered with the
    /// whole file, a changed validator, ...
    std::function<bool(const client_response&)> on_head;
};


class client {
public:
    explicit client(client_options opts = {});
    /// Closes the pooled connections, and the HTTP/2 connections of every vCPU (each on its own
    /// vCPU, soon after this returns).
    ~client();
    client(const client&) = delete;
    client& operator=(const client&) = delete;

    /// Sends a request and reads the whole response. Errors: EINVAL (a malformed URL, an
    /// unsupported scheme, a field name that is not a token or CR, LF or NUL in a field value:
    /// nothing is sent), resolution and connect errors, TLS errors (verify_failed, ...),
    /// ETIMEDOUT (connect, read or total timeout), EPROTO (a malformed response), EMSGSIZE (a
    /// body over max_body_bytes), ELOOP (more redirects than max_redirects... when following),
    /// ECONNRESET / ENODATA (the server closed mid-response), ECANCELED. A server that answers
    /// before it has the whole request body (a 413, a 401, RFC 9112 9.5), then closes the
    /// connection or waits, neither reading nor closing: over plain TCP its answer is the
    /// call's, not EPIPE, ECONNRESET or ETIMEDOUT after read_timeout (the client watches for
    /// it while the body waits for room); the rest of the body is not sent, and the connection
    /// is not reused. Over TLS the failed write ends the session, and its error stands; a
    /// server that waits holds the call until read_timeout (a record, once begun, is written
    /// whole, and the socket cannot tell an answer from a session ticket).
    result<client_response> send(const client_request& req);
    /// send() into `out`: a response passed again keeps its buffers (fields, body, URL), so a
    /// caller that sends in a loop allocates nothing per response once they have grown. On an
    /// error, out's contents are unspecified. Errors: those of send().
    result<void> send(const client_request& req, client_response& out);
    result<client_response> get(std::string_view url);
    /// As send(), but the body is handed to on_body piece by piece (returning false stops the
    /// transfer and closes the connection: ECANCELED).
    result<client_response> send(const client_request& req,
                                 const std::function<bool(std::string_view piece)>& on_body);
    /// The two at once: the body to on_body, the rest into `out`, whose buffers are reused (a
    /// load generator that counts bodies and keeps none). Errors: those of send().
    result<void> send(const client_request& req, client_response& out,
                      const std::function<bool(std::string_view piece)>& on_body);

    struct stats {
        uint64_t connections_opened = 0;
        uint64_t connections_reused = 0;
        uint64_t retries = 0;
        size_t idle = 0;
        uint64_t http2_requests = 0;  // requests sent over HTTP/2
    };
    stats statistics() const noexcept;

    struct impl;

private:
    std::unique_ptr<impl> impl_;
};

/// The parts of an http:// or https:// URL. Errors: EINVAL.
struct url {
    std::string scheme;  // "http" or "https"
    std::string host;    // without brackets for IPv6
    uint16_t port = 0;
    std::string target;  // path and query, "/" if empty
    static result<url> parse(std::string_view s);
    /// A Location value resolved against this URL as RFC 3986 5.2 says: absolute, network-path
    /// ("//host/p"), absolute-path, relative ("../p", "p") or query-only ("?q", which keeps the
    /// path); "." and ".." segments are removed and a fragment is dropped. Errors: EINVAL (a
    /// scheme other than http and https, a malformed authority, a byte a target may not hold).
    result<url> resolve(std::string_view location) const;
    /// "host" or "host:port" as a Host field (the port only when not the scheme's default).
    std::string authority() const;
    std::string to_string() const;
};

}  // namespace gluon::http
