// HTTP proxies as handlers: a reverse proxy in front of a pool of upstream servers, and a forward
// proxy (absolute-form requests and CONNECT tunnels). Both run on the HTTP/1.1 and HTTP/2
// servers like any handler.
//
// Bodies are streamed both ways through a fixed buffer per exchange: an upload or a download of
// any size costs the same memory. Hop-by-hop fields (Connection and the fields it names,
// Keep-Alive, Proxy-*, TE, Trailer, Transfer-Encoding, Upgrade) are removed in both directions;
// X-Forwarded-For is appended to, X-Forwarded-Proto and X-Forwarded-Host are set.
//
// Upstream failures become answers: a refused or failed connection, or a malformed response, is
// 502; a connect or read timeout is 504. Once the response's head has gone to the client a
// failure can no longer change the status: the response is aborted (response::abort), so that the
// client never takes a cut body for a complete one.
//
// Upstream connections are kept alive in a pool per upstream and vCPU (plain HTTP/1.1). A pooled
// connection the upstream has closed is not used for a request that cannot be sent again (with
// a body, or a method that is not idempotent, or any through the forward proxy): it is checked
// first. Others take a connection that idled under a second unchecked, and are sent again on a
// new one if it fails unanswered. Request bodies count against server_options::max_body_bytes:
// raise it on a proxy's server (or a middleware, for its request: request::max_body_bytes). A
// declared length over it is answered 413 before any upstream connection is taken.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gluon/common/clock.h"
#include "gluon/http/parser.h"
#include "gluon/http/server.h"

namespace gluon::http {

/// What both proxies share.
struct proxy_common_options {
    duration connect_timeout = std::chrono::seconds(5);  // 504 past it, 502 on a refusal
    duration read_timeout = std::chrono::seconds(60);    // between reads from the upstream: 504
    duration send_timeout = std::chrono::seconds(60);    // between writes to the upstream: 504
    size_t max_idle_per_upstream = 64;                   // pooled connections, per upstream and vCPU
    duration idle_timeout = std::chrono::seconds(30);    // a pooled connection idle longer is closed
    size_t buffer_bytes = 16 * 1024;                     // per exchange, each way
    http::limits limits;                                 // for the upstream's response heads
    bool x_forwarded = true;  // X-Forwarded-For (appended), X-Forwarded-Proto, X-Forwarded-Host
    std::string via;          // a Via value to add ("1.1 gluon"); empty: none
};

struct proxy_options : proxy_common_options {
    /// "host:port" of each upstream (an IP literal, or a name resolved at each connect).
    std::vector<std::string> upstreams;
    enum class balance : uint8_t {
        round_robin,  // in turn (per vCPU)
        least_busy,   // the upstream with the fewest exchanges in flight from this proxy
    } balancing = balance::round_robin;
    /// New attempts, on the next upstream, for a request without a body whose method is
    /// idempotent, when the upstream failed before sending anything back (its connection
    /// closed or reset). Not when sending the request or waiting for the answer timed out: the
    /// upstream may still be working on it, so the client gets its 504 after one read_timeout
    /// (not 1 + retries of them), and no second upstream takes the request that made the first
    /// one slow.
    int retries = 1;
    /// Pass the client's Host on (true), or send the upstream's own "host:port".
    bool preserve_host = true;
};

/// A handler that forwards every request but CONNECT to one of opts.upstreams (entries that are
/// not host:port are logged and left out). Errors: none are returned; the handler answers them:
/// 501 for CONNECT (tunnels are forward_proxy's), 502 when no upstream could be reached (refused, unreachable, a name that does not resolve,
/// an empty list), when the upstream's response head is malformed, or when its connection fails
/// before that head arrives (after the retries allowed above); 504 when connecting, sending the
/// request or waiting for the response took longer than its timeout. An upstream that answers
/// before it has the whole request body (a 413, a 401) and closes the connection while the body
/// is being sent: its answer is relayed (RFC 9112 9.5), not a 502. A failure after the head
/// went to the client aborts the response (response::abort). A request body that fails is
/// answered by the server as for any handler (413 over max_body_bytes, 408, 400; nothing if the
/// client left), and the upstream connection it was going to is closed.
handler reverse_proxy(proxy_options opts);

struct forward_proxy_options : proxy_common_options {
    /// Whether a client may reach host:port (`tunnel`: by CONNECT). nullptr: any host, and
    /// CONNECT only to connect_ports. A refusal is answered 403.
    std::function<bool(std::string_view host, uint16_t port, bool tunnel)> allow;
    /// The ports CONNECT may reach when `allow` is not set.
    std::vector<uint16_t> connect_ports = {443};
    duration tunnel_idle_timeout = std::chrono::minutes(5);  // a tunnel silent both ways is closed
};

/// A handler for a forward proxy: absolute-form requests ("GET http://host/path HTTP/1.1") are
/// forwarded to their origin (http:// only) through the same pool and rules as reverse_proxy,
/// and CONNECT opens a tunnel that copies bytes both ways until either side closes (a half close
/// is passed on) or it is silent for tunnel_idle_timeout. Errors: none are returned; the handler
/// answers 400 (not an http:// URL, a malformed one, a CONNECT target that is not host:port),
/// 403 (refused by `allow`, or a CONNECT port not in connect_ports), 501 (CONNECT over HTTP/2),
/// and 502 or 504 for the origin as reverse_proxy does. A tunnel answers 200 once its upstream
/// connection is open; failures after that close both connections.
handler forward_proxy(forward_proxy_options opts);

}  // namespace gluon::http
