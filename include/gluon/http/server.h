// An HTTP/1.1 server: a fiber per connection running blocking, sequential handler code.
// Keep-alive and pipelining (requests answered in order, the responses to a batch of pipelined
// requests written with one send), chunked bodies both ways, Expect: 100-continue, HEAD, and
// limits and timeouts that make slow or hostile clients cheap. Over any byte stream: plain TCP,
// Unix sockets, or TLS through net::server_options::wrap (tls::server_wrap).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/http/message.h"
#include "gluon/net/server.h"

namespace gluon::http {

using handler = std::function<void(request&, response&)>;

struct server_options : net::server_options {
    http::limits limits;                       // head size (431/414) and field count (431)
    /// A request body over it: 413 (a declared Content-Length at the body's first read). This
    /// and the two body timeouts below are each request's defaults: a handler or a middleware
    /// changes them for its own request (request::max_body_bytes, body_timeout,
    /// body_total_timeout), e.g. for a route that takes larger uploads.
    uint64_t max_body_bytes = 1 << 20;
    uint64_t max_requests_per_connection = 0;  // 0: no limit; else Connection: close on the last
    /// From a request's first byte to its blank line: 408. Over HTTP/2, from a stream's
    /// HEADERS frame to the end of its head (its CONTINUATION frames): past it the connection
    /// ends (GOAWAY), as nothing else may come on it meanwhile.
    duration header_timeout = std::chrono::seconds(10);
    /// Between reads of a body: 408. A gRPC call (rpc::grpc::server) lifts it, and
    /// max_body_bytes, off its own request: its deadline bounds its waits.
    duration body_timeout = std::chrono::seconds(30);
    /// HTTP/1.1: from a request's head to the end of its body, however steadily it comes: 408
    /// (a client trickling its body a byte at a time never waits body_timeout out). The
    /// default takes the default max_body_bytes (1 MiB) at 1.7 KB/s; forever for uploads that
    /// may stream for longer. Over HTTP/2, where a request body is also a gRPC call's stream
    /// of messages that may rightly last for hours, it bounds only the rest of a body nobody
    /// reads: a stream whose handler has returned while the client has not ended its request
    /// lingers, its body dropped, until the client ends it, sends nothing for body_timeout, or
    /// is still sending body_total_timeout later; then it is reset (RST_STREAM NO_ERROR).
    duration body_total_timeout = std::chrono::minutes(10);
    /// A keep-alive connection waiting for a request; over HTTP/2, one with no stream open,
    /// counted from when its last stream ended (PINGs and other frames that open no stream do
    /// not start it again; the connection notices the end up to min(body_timeout,
    /// idle_timeout) late when no frame comes meanwhile).
    duration idle_timeout = std::chrono::seconds(60);
    /// Between writes of a response. Over HTTP/2 also how long a response may wait for the
    /// client's flow-control window: past it the stream is reset (RST_STREAM CANCEL; a streamed
    /// write fails with ETIMEDOUT), or, when the connection's own window is the closed one, the
    /// connection ends (GOAWAY).
    duration send_timeout = std::chrono::seconds(30);
    /// A keep-alive connection idle this long gives its buffers back (about 12 KiB), keeping
    /// only its fiber's stack until the next request.
    duration release_buffers_after = std::chrono::seconds(1);
    bool access_log = false;  // common log format to gluon's log at info level
    /// HTTP/2 (ADR 0016) on the same handlers: in clear text for a client that opens with
    /// HTTP/2's connection preface (prior knowledge), and over TLS when ALPN picks "h2" (list
    /// "h2" before "http/1.1" in the TLS context's alpn).
    bool http2 = true;
    /// Streams opened past it are refused; handlers run on at most this many fibers per
    /// connection (a stream reset while its handler runs still holds one; others wait).
    uint32_t h2_max_concurrent_streams = 100;
    uint32_t h2_stream_window = 256 * 1024;    // request body bytes buffered per stream
    uint32_t h2_connection_window = 1 << 20;   // ... and per connection, over all its streams
    std::string server_name = "gluon";  // the Server field; empty: none
};

/// Serves HTTP/1.1 on one connection until it closes, a limit ends it, or `stopping` becomes
/// true while it is idle. For servers of your own (net::sharded_server, a Unix socket, ...).
void serve_connection(net::byte_stream& s, const handler& h, const server_options& opts,
                      const bool* stopping = nullptr);

class server {
public:
    /// Listens on addr and serves h on the calling vCPU. Connections read ahead
    /// (net::stream::read_ahead, whatever opts.read_ahead says): a handler that takes a
    /// connection over (an upgrade, a tunnel) reads it through its byte_stream, on its own
    /// fiber's vCPU. Errors: those of net::server::start.
    static result<std::unique_ptr<server>> start(const net::address& addr, handler h,
                                                 server_options opts = {});
    ~server();
    server(const server&) = delete;
    server& operator=(const server&) = delete;

    const net::address& local_address() const noexcept;
    /// Connections open now.
    size_t connections() const noexcept;
    /// Graceful stop: no new connections; idle keep-alive connections are closed now; requests
    /// in flight finish (their connections close after the response) for up to `grace`, then
    /// are interrupted. An HTTP/2 connection with streams open is told now to open no more
    /// (GOAWAY naming the last stream it opened: those after it are not served, and its client
    /// may send them elsewhere). Call from the server's vCPU.
    void stop(duration grace = forever) noexcept;

    struct state;

private:
    server() = default;
    std::unique_ptr<state> st_;
};

}  // namespace gluon::http
