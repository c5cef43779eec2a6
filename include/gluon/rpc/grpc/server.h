// gRPC over gluon's HTTP/2 (ADRs 0016, 0021): a server that gRPC clients of any language call, with the
// blocking, sequential handler code of the rest of gluon. Messages are bytes (protobuf's
// encoding, or anything else); typed helpers below wrap the four call kinds for protobuf-style
// message types (ParseFromArray, ByteSizeLong, SerializeToArray) without generated stubs.
//
// Status codes, the grpc-status / grpc-message trailers (percent-encoded), grpc-timeout
// deadlines and metadata follow the gRPC-over-HTTP/2 protocol (a grpc-timeout that does not
// parse is answered INTERNAL before the handler runs, as grpc-go does); message compression is not
// offered: a request whose grpc-encoding is not identity is answered UNIMPLEMENTED before its
// handler runs, and a message with the compressed flag cannot be read (ENOTSUP; the typed
// helpers answer UNIMPLEMENTED), both with grpc-accept-encoding: identity. Malformed framing
// is EPROTO (INTERNAL).
#pragma once

#include <cerrno>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/http/server.h"
#include "gluon/rpc/grpc/status.h"

namespace gluon::rpc::grpc {

/// The server side of one call: the request's metadata and deadline, its messages to read, and
/// the response messages and metadata to write. Lives for the handler's run.
///
/// The handler runs on a fiber of its own, which is interrupted (fiber::interrupt) once the
/// client cancels the call (RST_STREAM, or the connection ends) or its deadline passes: the
/// blocking call it is in then, or its next one, of any kind (a sleep, a lock, a read of
/// another socket, a call to another server), fails with ECANCELED, so that work nobody waits
/// for stops. One interrupt: a handler that goes on (to clean up) blocks as usual after it, and
/// tells why from cancelled(). This context's own calls report ETIMEDOUT for the deadline.
class server_context {
public:
    /// "/package.Service/Method".
    std::string_view method() const noexcept;
    /// A request metadata value (lowercase key), or empty.
    std::string_view metadata(std::string_view key) const noexcept;
    /// The client's deadline (grpc-timeout), or k_no_deadline.
    deadline_t deadline() const noexcept { return deadline_; }
    /// True once the client has cancelled the call (RST_STREAM, or the connection ended) or its
    /// deadline has passed: nobody waits for the answer any more (gRPC C++'s IsCancelled).
    bool cancelled() const noexcept;
    /// The next request message into msg; false once the client has sent its last. Waits as
    /// long as the call's deadline allows, and without one until a message comes, the call
    /// ends or the connection does: a call's request, a stream that may rightly stay quiet for
    /// hours, is not held to the HTTP server's body_timeout. Errors:
    /// ECANCELED (the client cancelled: RST_STREAM, or the connection ended; or an interrupt of
    /// the handler's fiber from elsewhere, a server's stop), ETIMEDOUT (the deadline passed), EPROTO (a
    /// malformed message, or one cut short by the end of the request), ENOTSUP (a compressed
    /// message: no compression is offered), EMSGSIZE (one over max_message_bytes), the stream's.
    result<bool> read(std::string& msg);
    /// The same without a copy: msg views the message in the call's buffer, valid until the
    /// next read.
    result<bool> read(std::string_view& msg);
    /// The largest message write sends (status.h).
    static constexpr size_t k_max_message = grpc::k_max_message;
    /// Sends a response message (the response head first, with the metadata added so far).
    /// Errors: ECANCELED (as read's), EPIPE (the connection is gone), ETIMEDOUT, EMSGSIZE (over
    /// k_max_message: nothing is sent).
    result<void> write(std::string_view msg);
    /// Sends a message written in place: fill(p) writes exactly n bytes at p and returns true
    /// (a serializer writing into the call's buffer, saving a copy); false sends nothing.
    /// Errors: those of write, EINVAL (fill returned false); fill is not called for EMSGSIZE.
    template <typename Fill>
    result<void> write_with(size_t n, Fill&& fill) {
        // The prefix would hold n modulo 2^32, and the stream carry a message of that length
        // followed by the rest as garbage.
        if (n > k_max_message) return errno_error(EMSGSIZE);
        if (!fill(begin_write(n))) return errno_error(EINVAL);
        return end_write();
    }
    /// Waits until the client cancels the call or its deadline passes (true), or `timeout`
    /// passes first (false): for a handler with nothing to read that works until nobody waits.
    /// An interrupt from elsewhere (a server's stop) ends it too (false), and stays pending.
    bool wait_cancelled(duration timeout);
    /// Response metadata: added to the head if no message was written yet. A key or value
    /// holding CR, LF or NUL, or a key holding ':', is dropped (http::response::header's rule:
    /// no field can be smuggled in, a grpc-status least of all).
    void add_metadata(std::string_view key, std::string_view value);
    /// Trailing metadata, sent with the status; dropped by the same rule.
    void add_trailing_metadata(std::string_view key, std::string_view value);

    struct impl;
    explicit server_context(impl& i) noexcept : im_(i) {}

private:
    char* begin_write(size_t n);
    result<void> end_write();
    bool deadline_passed() const noexcept;
    int call_error(int e) const noexcept;
    impl& im_;
    deadline_t deadline_ = k_no_deadline;
    friend struct impl;
};

using method_handler = std::function<status(server_context&)>;

struct server_options {
    /// A larger request message: RESOURCE_EXHAUSTED. It limits each message, not the call: a
    /// call's request as a whole (a client stream of any length) is not held to the HTTP
    /// server's max_body_bytes, and HTTP/2's flow control bounds what waits unread.
    size_t max_message_bytes = 4 << 20;
};

/// Methods by full name, served as an http::handler: mount it on an http::server (HTTP/2 by
/// prior knowledge, or h2 over TLS by ALPN). Requests that are not gRPC get 415 (wrong content
/// type) or 505 (HTTP/1.x); unknown methods UNIMPLEMENTED.
class server {
public:
    explicit server(server_options o = {}) : opts_(o) {}
    /// Registers a method ("/package.Service/Method"). A handler that throws answers UNKNOWN
    /// with "Unexpected error in RPC handling", as gRPC C++ does: the exception's text is
    /// logged, not sent (it may tell a client about the server's internals).
    void add(std::string full_name, method_handler h) { methods_[std::move(full_name)] = std::move(h); }
    /// The handler to give http::server::start (it refers to this server: keep it alive).
    http::handler as_handler() const;

private:
    server_options opts_;
    std::map<std::string, method_handler, std::less<>> methods_;
};

// ---- typed helpers, for protobuf-style message types -------------------------------------------

namespace detail {
/// A protobuf-style message serialized straight into the call's buffer. Errors: those of
/// server_context::write, EMSGSIZE (a message over 2 GiB, or one that fails to serialize).
template <typename Msg>
result<void> write_message(server_context& ctx, const Msg& m) {
    size_t n = m.ByteSizeLong();
    if (n > server_context::k_max_message) return errno_error(EMSGSIZE);
    auto w = ctx.write_with(n, [&](char* p) { return m.SerializeToArray(p, static_cast<int>(n)); });
    if (!w && w.error() == std::errc::invalid_argument) return errno_error(EMSGSIZE);
    return w;
}

/// The status a typed helper ends its call with when `got`, a result of server_context::read,
/// brought no request message: the client's end of stream before one came is INTERNAL; a failed
/// read keeps its reason, so a client whose message was too large or compressed, whose deadline
/// passed or who cancelled learns that rather than an internal error.
inline status no_request(const result<bool>& got) {
    if (got) return {code::internal, "no request message"};
    switch (got.error().value()) {
        case EMSGSIZE: return {code::resource_exhausted, "request message over max_message_bytes"};
        case ENOTSUP: return {code::unimplemented, "compressed request message (no compression is offered)"};
        case ETIMEDOUT: return {code::deadline_exceeded, "deadline exceeded while reading the request"};
        case ECANCELED: return {code::cancelled, "the client cancelled the call"};
        default: return {code::internal, "no request message: " + got.error().message()};
    }
}

/// For a unary method, once its one request message has been read:
/// the client's end of stream must follow. Another message is what gRPC's status codes call a
/// cardinality violation, answered UNIMPLEMENTED as that table says (grpc-go says INTERNAL)
/// rather than dropped unread. A failed read keeps its reason.
inline status no_more_requests(server_context& ctx) {
    std::string_view extra;
    auto got = ctx.read(extra);
    if (!got) return no_request(got);
    if (*got) return {code::unimplemented, "more than one request message for a method that takes one"};
    return {};
}
}  // namespace detail

/// Unary: fn answers the one request message with one response. The request's end of stream is
/// waited for before fn runs (a second request message is refused: detail::no_more_requests).
template <typename Req, typename Resp>
method_handler unary(std::function<status(server_context&, const Req&, Resp&)> fn) {
    return [fn = std::move(fn)](server_context& ctx) -> status {
        std::string_view in;
        auto got = ctx.read(in);
        if (!got || !*got) return detail::no_request(got);
        Req req;
        if (!req.ParseFromArray(in.data(), static_cast<int>(in.size()))) return {code::internal, "request does not parse"};
        if (status s = detail::no_more_requests(ctx); !s.ok()) return s;
        Resp resp;
        status s = fn(ctx, req, resp);
        if (!s.ok()) return s;
        if (auto w = detail::write_message(ctx, resp); !w) return {code::unavailable, w.error().message()};
        return s;
    };
}

/// Server streaming: fn writes its responses through `send`, from its one request message on.
/// The request's end of stream is not waited for: a client may keep its side open while the
/// responses stream (gRPC C++'s server does not wait either), and a message after the first is
/// left unread.
template <typename Req, typename Resp>
method_handler server_streaming(std::function<status(server_context&, const Req&, const std::function<bool(const Resp&)>& send)> fn) {
    return [fn = std::move(fn)](server_context& ctx) -> status {
        std::string_view in;
        auto got = ctx.read(in);
        if (!got || !*got) return detail::no_request(got);
        Req req;
        if (!req.ParseFromArray(in.data(), static_cast<int>(in.size()))) return {code::internal, "request does not parse"};
        auto send = [&](const Resp& r) { return detail::write_message(ctx, r).has_value(); };
        return fn(ctx, req, send);
    };
}

/// Client streaming and bidirectional: fn reads requests through `next` and writes through
/// `send`. `next` answers false after the client's last request, and also when a request could
/// not be read or parsed: the call then ends with that reason's status (as unary's), whatever fn
/// returns, since fn cannot tell that end from the client's.
template <typename Req, typename Resp>
method_handler streaming(std::function<status(server_context&, const std::function<bool(Req&)>& next,
                                              const std::function<bool(const Resp&)>& send)> fn) {
    return [fn = std::move(fn)](server_context& ctx) -> status {
        std::optional<status> failed;
        auto next = [&](Req& r) {
            if (failed) return false;
            std::string_view in;
            auto got = ctx.read(in);
            if (got && !*got) return false;  // the client's last request came before
            if (!got) failed = detail::no_request(got);
            else if (!r.ParseFromArray(in.data(), static_cast<int>(in.size())))
                failed = status{code::internal, "request does not parse"};
            else return true;
            return false;
        };
        auto send = [&](const Resp& r) { return detail::write_message(ctx, r).has_value(); };
        status s = fn(ctx, next, send);
        return failed ? *failed : s;
    };
}

}  // namespace gluon::rpc::grpc
