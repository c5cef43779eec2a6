// A stream server: an accept loop on the calling vCPU that runs a handler per connection in its
// own fiber, with a graceful stop. Running out of fds (EMFILE/ENFILE) neither spins the CPU nor
// kills the listener: the loop backs off and logs (rate-limited).
//
// The handler gets a byte_stream: the accepted socket itself, or what server_options::wrap made
// of it in the connection's fiber (tls::server_wrap(ctx): a TLS handshake), so one handler serves
// plain and TLS listeners alike.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/net/socket.h"
#include "gluon/runtime/vcpu.h"

namespace gluon::net {

/// Turns an accepted socket into the stream the handler gets; runs in the connection's fiber.
/// An error drops the connection (the socket is closed) and counts in server::wrap_failures().
using stream_wrapper = std::function<result<std::unique_ptr<byte_stream>>(stream&& accepted)>;

struct server_options : listen_options {
    /// Empty: the handler gets the accepted socket.
    stream_wrapper wrap;
    /// Accepted connections read ahead (stream::read_ahead): for request/response protocols
    /// whose handler makes every read through the byte_stream it is given, on its own fiber's
    /// vCPU (the connection is closed there when the handler returns).
    bool read_ahead = false;
};

class server {
public:
    using handler = std::function<void(byte_stream&)>;
    /// Listens on addr and starts accepting in a fiber on the calling vCPU. The handler runs
    /// in a new fiber per connection; the connection is closed when it returns.
    /// Errors: those of listener::listen, EPERM outside a vCPU.
    static result<std::unique_ptr<server>> start(const address& addr, handler h,
                                                 const server_options& opts = {});
    /// Stops if still running (with no grace period). Any thread, as stop().
    ~server();
    server(const server&) = delete;
    server& operator=(const server&) = delete;

    const address& local_address() const noexcept { return local_; }
    /// The listening socket (for socket options such as a reuseport steering program).
    int listen_fd() const noexcept { return listener_.get(); }
    /// Connections whose handler is still running. The counters may be read from any thread
    /// (sharded_server reads its shards'); they only ever change on the server's vCPU.
    size_t active() const noexcept { return active_.load(std::memory_order_relaxed); }
    uint64_t accepted() const noexcept { return accepted_.load(std::memory_order_relaxed); }
    /// Accepted connections that the wrap step refused (a failed TLS handshake, ...).
    uint64_t wrap_failures() const noexcept { return wrap_failures_.load(std::memory_order_relaxed); }
    /// Stops accepting (the listener is closed), lets running handlers finish for up to
    /// `grace`, then interrupts the rest (their blocking calls return ECANCELED) and waits for
    /// them. Any thread may call it: off the server's vCPU it runs in a fiber there (the
    /// handlers' connections are that vCPU's) and the caller waits for it, so that vCPU must
    /// still be running.
    void stop(duration grace = forever) noexcept;
    /// The first half of stop(): the accepting fiber ends and the listener is closed; running
    /// handlers go on. For servers that stop together (sharded_server): none of them accepts
    /// while the others' handlers finish. Any thread, as stop().
    void stop_accepting() noexcept;

    struct conn;

private:
    server() = default;
    void accept_loop();
    void serve(stream& s);

    listener listener_;
    address local_;
    handler handler_;
    stream_wrapper wrap_;
    vcpu_handle owner_;  // the vCPU that accepts and runs the handlers
    std::atomic<size_t> active_{0};
    std::atomic<uint64_t> accepted_{0};
    std::atomic<uint64_t> wrap_failures_{0};
    bool nodelay_ = true;
    bool read_ahead_ = false;
    bool stopping_ = false;
    struct state;
    std::unique_ptr<state> st_;
};

}  // namespace gluon::net
