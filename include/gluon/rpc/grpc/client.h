// A gRPC client over gluon's HTTP/2 client session (ADRs 0016, 0021): calls to gRPC servers of
// any language from blocking fiber code. A channel holds one HTTP/2 connection per vCPU to its
// target (h2c by prior knowledge, or h2 over TLS chosen by ALPN) and multiplexes every fiber's
// calls on it as streams; a connection that failed or was told GOAWAY is replaced on the next
// call (the calls in flight on one told GOAWAY go on: the server still answers them).
//
// As in gRPC's own APIs, a call's reads and writes answer true or false and the reason is the
// status that finish() returns: transport failures become UNAVAILABLE, a passed deadline
// DEADLINE_EXCEEDED, a cancelled call CANCELLED, a stream the server reset CANCELLED or
// INTERNAL; answers that are not gRPC map as the gRPC-over-HTTP/2 protocol says (404 →
// UNIMPLEMENTED, 503 → UNAVAILABLE, ..., a 200 that is not application/grpc → UNKNOWN) as soon
// as their head arrives, unless they carry a grpc-status, which wins.
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
#include "gluon/rpc/grpc/status.h"

namespace gluon::net::tls {
class context;
}

namespace gluon::rpc::grpc {

struct channel_options {
    /// h2 over TLS with this client context (its ALPN must offer "h2"); nullptr: clear-text
    /// HTTP/2 by prior knowledge.
    const net::tls::context* tls = nullptr;
    /// The TLS server name and :authority; empty: the target's host.
    std::string authority;
    /// Bounds connecting and the TLS handshake together; a call's own deadline, when sooner,
    /// bounds them (and its wait for another fiber's connect) instead.
    duration connect_timeout = std::chrono::seconds(10);
    size_t max_message_bytes = 4 << 20;  // a larger response message ends the call: RESOURCE_EXHAUSTED
};

struct call_options {
    /// Sent as grpc-timeout and enforced here: past it the call is cancelled and ends with
    /// DEADLINE_EXCEEDED.
    deadline_t deadline = k_no_deadline;
    /// Request metadata (lowercase keys; "-bin" keys carry base64 as the caller gives it).
    std::vector<std::pair<std::string, std::string>> metadata;
};

/// One call in progress: request messages written, response messages read, then finish().
/// Move-only; destroying an unfinished call cancels it. Used by one fiber at a time, on the
/// vCPU that opened it.
class client_call {
public:
    client_call(client_call&&) noexcept;
    client_call& operator=(client_call&&) noexcept;
    ~client_call();

    /// Sends a request message; waits while the stream's send buffer is full. False: the call
    /// has ended (finish() says why; RESOURCE_EXHAUSTED for a message over k_max_message, which
    /// ends the call without sending it).
    bool write(std::string_view msg);
    /// Tells the server that no more requests follow (half-close). False: the call has ended.
    bool writes_done();
    /// The next response message into msg; false at the end of the responses or if the call
    /// failed (finish() tells which).
    bool read(std::string& msg);
    /// Ends the call: half-closes if needed, drops unread responses, and returns the status
    /// (the server's, or the local reason it failed). Idempotent.
    status finish();
    /// Cancels the call (RST_STREAM CANCEL); finish() then returns CANCELLED.
    void cancel() noexcept;
    /// Cancels the call for a reason found here (a response that does not parse, ...): finish()
    /// then returns s.
    void abort(status s) noexcept;

    /// A response metadata value (lowercase key), once the head arrived (after the first read
    /// or finish); empty if absent.
    std::string_view metadata(std::string_view key) const noexcept;
    /// A trailing metadata value, after finish(); empty if absent.
    std::string_view trailing_metadata(std::string_view key) const noexcept;

    struct state;
    explicit client_call(std::unique_ptr<state> s) noexcept;

private:
    std::unique_ptr<state> st_;
};

/// The client's view of a server: host, port and how to reach it. Thread-safe: fibers of every
/// vCPU may call through one channel (each vCPU has its own connection).
class channel {
public:
    /// A channel to host:port (nothing is connected until the first call).
    channel(std::string host, uint16_t port, channel_options o = {});
    ~channel();
    channel(const channel&) = delete;
    channel& operator=(const channel&) = delete;

    /// Starts a call of `method` ("/package.Service/Method"). Never fails here: a connection
    /// that cannot be made ends the call with UNAVAILABLE (or DEADLINE_EXCEEDED; CANCELLED if
    /// the calling fiber is interrupted while it connects or waits for another fiber's
    /// connect), which its read/write/finish report. Must be called on a vCPU.
    client_call call(std::string_view method, const call_options& o = {});

    /// A unary call with bytes: one request, one response.
    status unary(std::string_view method, std::string_view request, std::string& response,
                 const call_options& o = {});

    /// Closes the channel's connections, those of every vCPU (calls in flight on them end with
    /// UNAVAILABLE; a later call connects again). Any thread may call it: a connection of
    /// another vCPU is closed there, soon after this returns. The destructor closes them too.
    void close() noexcept;

    struct impl;

private:
    std::unique_ptr<impl> im_;
};

// ---- typed helpers, for message types with SerializeToString / ParseFromString --------------

/// A unary call with messages.
template <typename Req, typename Resp>
status unary(channel& ch, std::string_view method, const Req& req, Resp& resp, const call_options& o = {}) {
    std::string in, out;
    if (!req.SerializeToString(&out)) return {code::internal, "request does not serialize"};
    status s = ch.unary(method, out, in, o);
    if (s.ok() && !resp.ParseFromString(in)) return {code::internal, "response does not parse"};
    return s;
}

/// Writes a message of a call. False: the call has ended.
template <typename Msg>
bool write(client_call& c, const Msg& m) {
    std::string out;
    return m.SerializeToString(&out) && c.write(out);
}

/// Reads a message of a call. False at the end, or if the call failed or a message does not
/// parse (then finish() returns INTERNAL).
template <typename Msg>
bool read(client_call& c, Msg& m) {
    std::string in;
    if (!c.read(in)) return false;
    if (m.ParseFromString(in)) return true;
    c.abort({code::internal, "response does not parse"});
    return false;
}

}  // namespace gluon::rpc::grpc
