// A request as a handler sees it, and the response it fills in. Both live in the connection's
// fiber for one exchange; views they return stay valid until the handler returns.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/http/parser.h"

namespace gluon::net {
class byte_stream;
}

namespace gluon::http {

namespace detail {
class exchange;
class connection;
class h2_stream;
}
class router;

class request {
public:
    http::method method() const noexcept { return head_.verb; }
    std::string_view method_name() const noexcept { return head_.method_name; }
    /// The request target as sent (percent-encoded).
    std::string_view target() const noexcept { return head_.target; }
    /// The target's path (before '?') in its normal form, the one routes and static files
    /// match: percent-encoded unreserved characters decoded, "." and ".." segments resolved,
    /// repeated '/' merged (RFC 3986 6.2.2), so that "/%61dmin", "//admin" and "/x/../admin"
    /// reach what "/admin" reaches. Other escapes stay encoded. A ".." above the root is
    /// answered 400 before any handler runs.
    std::string_view path() const noexcept { return path_; }
    /// The target's path as sent.
    std::string_view raw_path() const noexcept { return head_.path; }
    /// The target's query (after '?'), or empty.
    std::string_view query() const noexcept { return query_; }
    std::string_view host() const noexcept { return head_.host; }
    int version_minor() const noexcept { return head_.version_minor; }
    /// 1 for HTTP/1.x, 2 for HTTP/2.
    int version_major() const noexcept { return head_.version_major; }
    /// The first field of that name (case-insensitive), or empty.
    std::string_view header(std::string_view name) const noexcept { return head_.find(name); }
    std::span<const http::header> headers() const noexcept { return {head_.headers, head_.header_count}; }
    /// A parameter of the matched route ("/users/:id" gives "id"; a prefix route "/files/*" gives
    /// "*", the rest of the path), or empty.
    std::string_view param(std::string_view name) const noexcept;
    bool has_param(std::string_view name) const noexcept;

    /// True if a body follows the head (Content-Length > 0 or chunked).
    bool has_body() const noexcept { return head_.body != framing::none; }
    /// The declared length, for a Content-Length body.
    uint64_t content_length() const noexcept { return head_.content_length; }
    /// Reads the next piece of the body (0: the body has ended). Answers `Expect: 100-continue`
    /// first. Errors: EMSGSIZE (over max_body_bytes(), or a Content-Length over it: the server
    /// answers 413), EPROTO (invalid chunked framing: 400), ENODATA (the client closed
    /// mid-body), ETIMEDOUT (body_timeout() between reads, or HTTP/1.1's body_total_timeout:
    /// 408), and the stream's errors.
    result<size_t> read_body(void* buf, size_t n);
    /// The same, waiting at most `timeout` for bytes when that is shorter than body_timeout(): for
    /// a handler with a deadline of its own (a gRPC call's). Errors: those of read_body; a
    /// `timeout` that passes gives ETIMEDOUT and, unlike body_timeout, leaves the body readable.
    /// A handler that then answers without reading the rest has its answer sent at once (over
    /// HTTP/1.1 the connection closes after it instead of waiting for the rest of the body).
    result<size_t> read_body(void* buf, size_t n, duration timeout);
    /// The whole body, read into memory owned by the request. Errors: those of read_body.
    result<std::string_view> body();

    /// This request's body limits, server_options' until changed: a handler, or a middleware
    /// before it, sets them for the rest of the body, over HTTP/1.1 and HTTP/2 alike (a route
    /// that takes larger uploads than the server's default, as nginx's client_max_body_size in
    /// a location; a stream that may rightly stay quiet for long). A declared Content-Length is
    /// checked at the body's first read, not before the handler runs, so that a route can
    /// raise the limit first; a request whose handler leaves such a body unread is still
    /// answered 413 unless its answer has started. Set once the body's end has been read,
    /// they have no effect. Errors: none.
    ///
    /// The most body bytes (UINT64_MAX: no limit). Lowered below what has already arrived, or
    /// below a declared Content-Length, it fails the next read with EMSGSIZE (413).
    void max_body_bytes(uint64_t n) noexcept { max_body_ = n; }
    uint64_t max_body_bytes() const noexcept { return max_body_; }
    /// The longest wait for body bytes (forever: none; a read then waits as long as its own
    /// timeout allows): past it the read fails with ETIMEDOUT and the body is dead (408). Once
    /// the handler has returned, what it left unread is waited for no longer than the server's
    /// body_timeout (and body_total_timeout).
    void body_timeout(duration d) noexcept { body_timeout_ = d; }
    duration body_timeout() const noexcept { return body_timeout_; }
    /// HTTP/1.1: the rest of the body must arrive within `d` from now (forever: no bound), in
    /// place of server_options::body_total_timeout from the head. Over HTTP/2, where that option
    /// bounds only a body nobody reads, it has no effect.
    void body_total_timeout(duration d) noexcept { body_until_ = timeout_deadline(d); }

    /// The client's IP address as text ("192.0.2.1", "2001:db8::1"), looked up once per
    /// connection (an access log or X-Forwarded-For at no system call per request); empty when
    /// the stream has no IP peer (a Unix socket, an in-memory stream). Errors: none.
    std::string_view client_ip();

    /// The connection's stream (for an upgrade, or its socket's addresses).
    net::byte_stream& stream() noexcept;
    /// Waits until the client gives the request up (HTTP/2: it resets the stream or the
    /// connection ends), for a handler with nothing to read that should stop when nobody waits
    /// for its answer. Errors: ETIMEDOUT, ECANCELED (interrupted), EOPNOTSUPP (HTTP/1.1).
    result<void> wait_abandoned(duration timeout);
    /// True once the client has given the request up (HTTP/2: it reset the stream, or the
    /// connection ended); always false over HTTP/1.1. Errors: none.
    bool abandoned() const noexcept;
    /// Interrupts the handler's fiber (fiber::interrupt: its blocking call in progress, or its
    /// next, fails with ECANCELED) once the client gives the request up, as wait_abandoned
    /// sees it, or `at` passes, whichever comes first (at once if the client has already):
    /// for a handler whose work, not only its reads of the body, should stop when nobody waits
    /// for its answer (a gRPC call's cancel and deadline). One interrupt, which holds until the
    /// handler returns; one that no blocking call took by then is dropped, so that it never
    /// reaches the fiber's next request. Call it from the handler's own fiber. Errors:
    /// EOPNOTSUPP (HTTP/1.1, as wait_abandoned), EPERM (not on a vCPU).
    result<void> interrupt_when_abandoned(deadline_t at = k_no_deadline);

    const request_head& head() const noexcept { return head_; }

private:
    friend class detail::connection;
    friend class detail::h2_stream;
    friend class router;
    explicit request(detail::exchange& c) noexcept : conn_(c) {}
    void shrink() noexcept {
        decltype(params_)().swap(params_);
        std::string().swap(body_);
    }
    detail::exchange& conn_;
    request_head head_;
    std::string_view path_, query_;
    std::string path_storage_;  // path_, when normalising changed it
    std::vector<std::pair<std::string_view, std::string_view>> params_;
    std::string body_;
    // The body's limits, set from server_options by the connection for each request.
    uint64_t max_body_ = 0;
    duration body_timeout_{};
    deadline_t body_until_ = k_no_deadline;  // HTTP/1.1: body_total_timeout's end
};

class response {
public:
    /// The status code (200 unless set).
    void status(int code) noexcept { status_ = static_cast<uint16_t>(code); }
    int status() const noexcept { return status_; }
    /// Adds a field. Names and values must not hold CR, LF or NUL (the field is dropped and
    /// logged otherwise: no header injection). Content-Length, Transfer-Encoding, Date and
    /// Connection are the server's: set them through the calls below.
    void header(std::string_view name, std::string_view value);
    void content_type(std::string_view type) { header("Content-Type", type); }
    /// Adds fields already formatted as "Name: value\r\n" lines, unchecked: for a handler that
    /// sends the same fields with many responses (a cached file's type, validators, ...) and
    /// checked them once with header()'s rules.
    void header_lines(std::string_view lines) { fields_ += lines; }

    /// The body, copied into the connection's output (replaces an earlier one).
    void body(std::string_view data);
    /// The body, sent from memory the caller keeps alive through `owner` until it is written
    /// (a cached file's bytes): no copy for large bodies.
    void body(std::string_view data, std::shared_ptr<const void> owner);
    /// The body is `len` bytes of the regular file `fd` from `offset`, sent with sendfile where
    /// the transport allows. The response owns fd (closes it) if own_fd.
    void file(int fd, int64_t offset, uint64_t len, bool own_fd);

    /// Streams the body: the first call sends the head (with Transfer-Encoding: chunked unless
    /// content_length() was set), each call sends its bytes. Errors: the stream's; EINVAL if
    /// the declared content length would be exceeded.
    result<void> write(std::string_view data);
    /// Declares the length of a streamed body (before the first write). A response to HEAD
    /// declares the length of the body a GET would get and writes none.
    void content_length(uint64_t n) noexcept { declared_length_ = n; }
    /// Ends a streamed body (the last chunk); called by the server if the handler did not.
    result<void> finish();
    /// Adds a trailer field, sent after a streamed body (HTTP/1.1 chunked, HTTP/2) when the
    /// body ends; the rules of header(). A response that is not streamed over HTTP/1.1 has no
    /// trailer section: its trailers are dropped.
    void trailer(std::string_view name, std::string_view value);

    /// Closes the connection after this response.
    void close_connection() noexcept { close_ = true; }
    /// The handler has taken the connection over (a CONNECT tunnel, a protocol upgrade) and
    /// writes to request::stream() itself: the server writes no response and closes the
    /// connection when the handler returns. Over HTTP/1.1 the responses to earlier pipelined
    /// requests are written first (when request::stream() is called after detach(), or when
    /// the handler returns).
    void detach() noexcept { detached_ = close_ = true; }
    /// The response cannot be completed (a proxy's upstream failed mid-body): nothing more is
    /// sent, and the client sees a failure instead of a short body that looks complete. Over
    /// HTTP/1.1 the connection is closed without ending the body (after the responses to earlier
    /// pipelined requests); over HTTP/2 the stream is reset.
    void abort() noexcept { detach(); }
    /// For a protocol upgrade (WebSocket): writes `raw_head`, a complete response head the caller
    /// formatted (101 Switching Protocols), after the responses still buffered for earlier
    /// pipelined requests, detaches the connection, and returns the bytes that arrived after
    /// this request's head (valid until the handler returns). Errors: the stream's.
    result<std::string_view> upgrade(std::string_view raw_head);
    bool head_sent() const noexcept { return head_sent_; }

private:
    friend class detail::connection;
    friend class detail::h2_stream;
    explicit response(detail::exchange& c) noexcept : conn_(c) {}
    void reset() noexcept;
    void release() noexcept;  // the file and the body's owner
    void shrink() noexcept {
        std::string().swap(fields_);
        std::string().swap(body_);
    }

    detail::exchange& conn_;
    uint16_t status_ = 200;
    bool close_ = false;
    bool detached_ = false;
    bool head_sent_ = false;
    bool streaming_ = false;
    bool chunked_ = false;
    bool finished_ = false;
    enum class body_kind : uint8_t { copy, view, file } kind_ = body_kind::copy;
    uint64_t declared_length_ = UINT64_MAX;
    uint64_t streamed_ = 0;
    std::string fields_;  // "Name: value\r\n"...
    std::string trailers_;  // the same form
    std::string body_;
    std::string_view body_view_;
    std::shared_ptr<const void> body_owner_;
    int file_fd_ = -1;
    bool own_fd_ = false;
    int64_t file_off_ = 0;
    uint64_t file_len_ = 0;
};

/// The standard reason phrase of a status code ("Not Found"), or "Unknown".
std::string_view reason_phrase(int status) noexcept;

}  // namespace gluon::http
