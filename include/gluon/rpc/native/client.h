// The client side of gluon's native RPC: one connection over any net::byte_stream, shared by
// any number of fibers on its vCPU. Each call gets a request id; the requests of all callers
// go out through the connection's writer fiber (those queued while it writes leave together, in
// one gather write), and one reader fiber matches each response to its caller by id and decodes
// it straight into the caller's response message, then wakes that caller.
//
// Every call carries its deadline (its timeout) to the server, which enforces it too. A caller
// that is interrupted (fiber::interrupt) or whose deadline passes gets ECANCELED (reported as
// errc::cancelled) or errc::deadline_exceeded at once, and the server is told to stop the call
// (its handler's fiber is interrupted). A request still being written then (to a server that is
// not reading) goes on from a copy: the caller's memory is its own again when the call returns.
// The cancels wait behind it; past client_options::max_queued_cancels of them the connection
// ends (a server that reads nothing for that many calls is taken for gone).
// A response that has started arriving is read into the caller's message up to the deadline;
// past it the call fails with deadline_exceeded and the rest of that response is skipped. (An
// interrupted caller whose response has started arriving waits for it, or for its deadline.)
#pragma once

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/net/address.h"
#include "gluon/net/byte_stream.h"
#include "gluon/rpc/native/method.h"
#include "gluon/runtime/fiber.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace gluon::rpc {

struct client_options {
    /// A response frame larger than this fails its call with errc::frame_too_large (its bytes
    /// are skipped; the connection goes on).
    size_t max_frame_bytes = 64 << 20;
    /// The read buffer; a response's value larger than half of it is read straight into a
    /// field that has room for it (a receive buffer); others grow through the buffer as their
    /// bytes arrive.
    size_t read_buffer_bytes = 64 << 10;
    /// The timeout of calls that give none.
    duration default_timeout = forever;
    /// Cancels (of calls that timed out or were interrupted after their request left) waiting
    /// to be written, as a server that does not read leaves them. One more ends the connection:
    /// its calls fail with errc::connection_closed, it is no longer healthy() and its stream is
    /// closed.
    size_t max_queued_cancels = 1024;
};

struct call_options {
    /// forever: client_options::default_timeout.
    duration timeout = forever;
};

namespace detail {
struct client_conn;
/// A call's request and response, type-erased for the connection.
struct call_args {
    uint16_t service, method;
    uint32_t schema;
    const void* req;
    size_t req_fixed;
    size_t (*encode)(const void* req, uint8_t* fixed, iov_list& var);
    void* resp;
    size_t resp_fixed;
    std::error_code (*decode)(void* resp, const uint8_t* fixed, size_t var_len, rx_list& targets);
};
result<void> call(client_conn& c, const call_args& a, duration timeout);
} // namespace detail

class client {
public:
    client() noexcept = default;
    client(client&&) noexcept = default;
    client& operator=(client&&) noexcept = default;
    client(const client&) = default; // another handle to the same connection
    client& operator=(const client&) = default;
    /// The last handle of an open connection closes it. A connection that ends before (the
    /// peer closed it, a transport error, a malformed frame, too many queued cancels) closes
    /// its stream as it ends.
    ~client();

    /// Speaks RPC over s, a connected stream (TCP, Unix, TLS, IPC). The connection's fibers run
    /// on the calling vCPU and calls must be made from it. Errors: EINVAL (no stream), EPERM
    /// (not on a vCPU), those of spawn.
    static result<client> open(std::unique_ptr<net::byte_stream> s, const client_options& o = {});
    /// Connects a TCP or Unix socket to addr and opens a client on it. Errors: those of
    /// net::stream::connect and open.
    static result<client> connect(const net::address& addr, const client_options& o = {},
                                  duration timeout = forever);

    /// Calls m with req and waits for resp. Errors: those of the handler (as the server sent
    /// them: errno values, or errc::handler_failed), errc::unknown_service, unknown_method,
    /// schema_mismatch, deadline_exceeded, cancelled (this fiber was interrupted),
    /// frame_too_large (either way), too_many_requests, buffer_too_small, connection_closed
    /// (closed, or broken by a transport error or a malformed frame), EINVAL (no connection),
    /// EXDEV (called from a vCPU other than the connection's).
    template <typename Req, typename Resp>
    result<void> call(const method<Req, Resp>& m, const Req& req, Resp& resp,
                      const call_options& o = {}) {
        if (!c_) return errno_error(EINVAL);
        detail::call_args a{m.service,
                            m.id,
                            m.schema(),
                            &req,
                            fixed_size<Req>(),
                            [](const void* r, uint8_t* f, iov_list& v) {
                                return encode(*static_cast<const Req*>(r), f, v);
                            },
                            &resp,
                            fixed_size<Resp>(),
                            [](void* r, const uint8_t* f, size_t n, rx_list& t) {
                                return decode_fixed(f, n, *static_cast<Resp*>(r), t);
                            }};
        return detail::call(*c_, a, o.timeout);
    }

    /// A round trip to the server's own ping method. Errors: those of call.
    result<void> ping(duration timeout = forever);
    /// The server's name table. Errors: those of call, EPROTO (a table that does not parse).
    result<std::vector<method_info>> describe(duration timeout = forever);

    /// False once the connection is closed or broken (a transport error, a malformed frame).
    bool healthy() const noexcept;
    /// Calls waiting for their response.
    size_t in_flight() const noexcept;
    struct counters {
        uint64_t frames_sent = 0; ///< requests and cancels
        uint64_t writes = 0;      ///< gather writes that carried them (fewer: pipelining)
    };
    counters stats() const noexcept;
    /// Fails the calls in flight with errc::connection_closed, stops the connection's fibers and
    /// closes the stream. Errors: EINVAL (no connection), those of closing the stream.
    result<void> close();

private:
    std::shared_ptr<detail::client_conn> c_;
};

struct pool_options {
    /// Connections kept open.
    size_t connections = 4;
    /// How often each connection is pinged; one that does not answer within health_timeout (or
    /// that broke) is closed and reopened.
    duration health_interval = std::chrono::seconds(1);
    duration health_timeout = std::chrono::seconds(1);
    client_options client;
};

/// A set of client connections to one server, used round-robin, kept healthy by a fiber that
/// pings each and replaces the ones that fail. All on the vCPU that started it.
class pool {
public:
    using connector = std::function<result<std::unique_ptr<net::byte_stream>>()>;

    /// Opens o.connections connections with `connect` and starts the health checks. Errors:
    /// those of the first connection's connect (a later one that fails is retried by the health
    /// checks), those of spawn.
    static result<std::unique_ptr<pool>> start(connector connect, const pool_options& o = {});
    ~pool();
    pool(const pool&) = delete;
    pool& operator=(const pool&) = delete;

    /// The next healthy connection; if there is none, one reconnect is tried at once.
    /// Errors: errc::connection_closed (none healthy), the connector's.
    result<client> get();
    template <typename Req, typename Resp>
    result<void> call(const method<Req, Resp>& m, const Req& req, Resp& resp,
                      const call_options& o = {}) {
        client c = GLUON_TRY(get());
        return c.call(m, req, resp, o);
    }
    /// Connections that are open and answered their last health check.
    size_t healthy() const noexcept;
    /// Connections replaced after failing a health check or breaking.
    uint64_t replaced() const noexcept { return replaced_; }
    /// Stops the health checks, waiting for one in progress (an interrupt of the calling fiber
    /// meanwhile is kept for its next blocking call), and closes every connection.
    void stop() noexcept;

private:
    pool() = default;
    void check_loop();
    result<void> reopen(size_t i);

    connector connect_;
    pool_options o_;
    std::vector<client> conns_;
    size_t next_ = 0;
    uint64_t replaced_ = 0;
    fiber checker_;
    bool stopped_ = false;
};

} // namespace gluon::rpc
