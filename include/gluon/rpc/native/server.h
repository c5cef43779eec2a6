// The server side of gluon's native RPC (docs/adr/0021-rpc-wire-format.md): methods registered
// by service and method id, served over any net::byte_stream (TCP, Unix socket, TLS, a
// shared-memory IPC stream). Each connection reads requests in one fiber, straight into the
// request messages, and runs every call's handler in a fiber of its own, so one connection
// carries many calls at once; responses go out through the connection's writer fiber, whatever
// finished while it was writing in one gather write.
//
// A handler is plain blocking code: result<void>(call_context&, const Req&, Resp&); one that
// throws answers errc::handler_failed. When the client cancels the call or its deadline
// passes, the handler's fiber is interrupted (its blocking calls return ECANCELED; see
// gluon/runtime/fiber.h) and the client gets errc::cancelled or errc::deadline_exceeded
// whatever the handler returns then.
#pragma once

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/net/byte_stream.h"
#include "gluon/net/server.h"
#include "gluon/rpc/native/method.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace gluon::rpc {

namespace detail {
struct server_call;
struct server_conn;
} // namespace detail

/// What a handler knows about its call.
class call_context {
public:
    /// The caller's deadline (its timeout, counted from the request's arrival), or k_no_deadline.
    deadline_t deadline() const noexcept { return deadline_; }
    /// What is left of it: the timeout for the handler's own blocking calls.
    duration time_left() const noexcept { return gluon::time_left(deadline_); }
    /// The request id on its connection.
    uint64_t id() const noexcept { return id_; }
    /// True once the client cancelled the call or its deadline passed.
    bool cancelled() const noexcept { return cancelled_; }

private:
    friend struct detail::server_call;
    friend struct detail::server_conn;
    deadline_t deadline_ = k_no_deadline;
    uint64_t id_ = 0;
    bool cancelled_ = false;
};

struct server_options {
    /// A request frame larger than this is refused with errc::frame_too_large (its bytes are
    /// skipped; the connection goes on).
    size_t max_frame_bytes = 16 << 20;
    /// Calls running at once on one connection; more are refused with errc::too_many_requests.
    /// Also the answers that may wait to be written on one connection: while that many wait (a
    /// client that sends requests but does not read its answers), the connection reads no more
    /// requests until the client reads.
    size_t max_in_flight = 1024;
    /// Each connection's read buffer; a request's value larger than half of it is read
    /// straight into a field that has room for it; others grow through the buffer as their
    /// bytes arrive (a request announcing 16 MiB holds what came of it, not 16 MiB).
    size_t read_buffer_bytes = 64 << 10;
    /// The time a frame (a request, a cancel, one being skipped) may take to arrive whole once
    /// its first byte has come: past it the connection is closed (serve() returns ETIMEDOUT;
    /// its calls running are interrupted), so a client that sends part of a frame and then
    /// nothing, or trickles it, holds no fiber and no buffer for long. The wait for a frame's
    /// first byte is not bounded: an idle connection stays open. forever: no bound.
    duration frame_timeout = std::chrono::seconds(30);
    /// Handler fibers' stack size (0: the runtime's default).
    size_t handler_stack_bytes = 0;
};

namespace detail {
/// The typed part of one server call: its request, response and the handler to run.
struct call_body {
    virtual ~call_body() = default;
    virtual std::error_code decode(const uint8_t* fixed, size_t var_len, rx_list& targets) = 0;
    virtual std::error_code invoke(call_context& ctx) = 0;
    virtual size_t encode(uint8_t* fixed, iov_list& var) const = 0;
};

struct method_entry {
    uint16_t service = 0, id = 0;
    uint32_t schema = 0;
    std::string name;
    size_t req_fixed = 0, resp_fixed = 0, body_size = 0;
    virtual ~method_entry() = default;
    /// Constructs the call body in `mem` (body_size bytes, 16-aligned).
    virtual call_body* construct(void* mem) const = 0;
};

template <typename Req, typename Resp, typename F> struct typed_entry final : method_entry {
    F fn;
    struct body final : call_body {
        const F& fn;
        Req req{};
        Resp resp{};
        explicit body(const F& f) : fn(f) {}
        std::error_code decode(const uint8_t* fixed, size_t var_len, rx_list& t) override {
            return decode_fixed(fixed, var_len, req, t);
        }
        std::error_code invoke(call_context& ctx) override {
            try {
                result<void> r = fn(ctx, std::as_const(req), resp);
                return r ? std::error_code{} : r.error();
            } catch (...) { // the library throws nothing, but a handler may
                return make_error_code(errc::handler_failed);
            }
        }
        size_t encode(uint8_t* fixed, iov_list& var) const override {
            return rpc::encode(resp, fixed, var);
        }
    };
    static_assert(alignof(body) <= 16);
    explicit typed_entry(F f) : fn(std::move(f)) {}
    call_body* construct(void* mem) const override { return new (mem) body(fn); }
};
} // namespace detail

class server {
public:
    explicit server(server_options o = {});
    ~server();
    server(const server&) = delete;
    server& operator=(const server&) = delete;

    /// Names a service for the name table. Errors: EEXIST (named already), EINVAL (id 0: the
    /// server's own).
    result<void> add_service(uint16_t id, std::string name);
    /// Registers a method's handler: result<void>(call_context&, const Req&, Resp&). Register
    /// everything before serving. Errors: EEXIST (the ids are taken), EINVAL (service 0).
    template <typename Req, typename Resp, typename F>
    result<void> add(const method<Req, Resp>& m, F fn) {
        if (m.service == 0) return errno_error(EINVAL);
        return add_entry(make_entry(m, std::move(fn)));
    }

    /// Serves one connection on the calling vCPU until the peer closes it (success), the
    /// stream fails, a malformed frame arrives, a frame takes longer than frame_timeout, or
    /// the calling fiber is interrupted; then interrupts the calls still running, waits for
    /// them, and returns. Errors: errc::malformed_frame, ETIMEDOUT (frame_timeout), ECANCELED
    /// (interrupted), the transport's.
    result<void> serve(net::byte_stream& s);
    /// serve() as a net::server handler (the server must outlive the net::server).
    net::server::handler handler() {
        return [this](net::byte_stream& s) { (void)serve(s); };
    }

    /// The name table: every method, with its ids, schema hash and names.
    std::vector<method_info> methods() const;

    struct counters {
        uint64_t calls = 0;     ///< handlers run (counted in batches while a connection runs)
        uint64_t refused = 0;   ///< calls answered with an error before any handler ran
        uint64_t cancelled = 0; ///< calls the client cancelled
        uint64_t expired = 0;   ///< calls whose deadline passed on the server
        uint64_t malformed = 0; ///< connections closed for a malformed frame
        uint64_t throttled = 0; ///< times a connection stopped reading requests because
                                ///< max_in_flight answers waited to be written
    };
    /// A snapshot; connections on any vCPU add to it.
    counters stats() const noexcept;

private:
    friend struct detail::server_conn;
    template <typename Req, typename Resp, typename F>
    static std::unique_ptr<detail::method_entry> make_entry(const method<Req, Resp>& m, F fn) {
        auto e = std::make_unique<detail::typed_entry<Req, Resp, F>>(std::move(fn));
        e->service = m.service;
        e->id = m.id;
        e->schema = m.schema();
        e->name = m.name;
        e->req_fixed = fixed_size<Req>();
        e->resp_fixed = fixed_size<Resp>();
        e->body_size = sizeof(typename detail::typed_entry<Req, Resp, F>::body);
        return e;
    }
    result<void> add_entry(std::unique_ptr<detail::method_entry> e);
    const detail::method_entry* find(uint16_t service, uint16_t id,
                                     bool& service_known) const noexcept;

    server_options opts_;
    std::vector<std::vector<std::unique_ptr<detail::method_entry>>> table_; // [service][method]
    std::vector<std::string> service_names_;
    // serve() may run on several vCPUs at once (a sharded server): the counters are shared.
    struct shared_counters {
        std::atomic<uint64_t> calls{0}, refused{0}, cancelled{0}, expired{0}, malformed{0},
            throttled{0};
    };
    shared_counters stats_;
};

} // namespace gluon::rpc
