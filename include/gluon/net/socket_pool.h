// A pool of client connections, keyed by destination, for protocols that reuse a connection for
// several requests (HTTP/1.1 keep-alive, RPC). get() hands out a lease on an idle connection when
// one is healthy, else connects; lease::release() gives the connection back.
//
// Connections are pooled per vCPU: one got on a vCPU is handed out again only on that vCPU, whose
// engine already has it registered and whose cache holds its socket (and, for a stream that
// reads ahead, may hold its next bytes), wherever it is released. Any thread may close one (a
// lease dropped elsewhere, clear(), ~socket_pool, another vCPU's sweep of expired connections):
// off its vCPU it is shut down before it is closed, so that the peer sees it end even while its
// vCPU's engine keeps a receive armed on it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/net/address.h"
#include "gluon/net/socket.h"

namespace gluon::net {

struct pool_options {
    /// Idle connections kept per destination (and vCPU); releasing one more closes the oldest.
    size_t max_idle_per_key = 8;
    /// An idle connection older than this is closed instead of reused (servers close idle
    /// keep-alive connections after a while; reusing one that is about to go costs a request).
    duration idle_timeout = std::chrono::seconds(30);
    /// For name resolution and connecting together, when get() has to connect.
    duration connect_timeout = std::chrono::seconds(10);
};

struct pool_stats {
    uint64_t hits = 0;       // get() served by an idle connection
    uint64_t misses = 0;     // get() that had to connect (including failed connects)
    uint64_t discarded = 0;  // idle connections closed: by the peer, with unread data, expired,
                             // or over max_idle_per_key
    size_t idle = 0;         // idle connections in the pool now
};

namespace detail {
struct pool_core;
}

class socket_pool {
public:
    /// A connection on loan from a pool. Destroying it (or close()) closes the connection: the
    /// safe default when the protocol state is unknown (a request half sent, a response half
    /// read). Call release() only at a clean message boundary.
    class lease {
    public:
        lease() noexcept = default;
        lease(lease&&) noexcept = default;
        lease& operator=(lease&& o) noexcept;
        lease(const lease&) = delete;
        lease& operator=(const lease&) = delete;
        /// Closes the connection if it holds one (see close()).
        ~lease();

        /// True while the lease holds a connection.
        explicit operator bool() const noexcept { return s_.valid(); }
        stream& get() noexcept { return s_; }
        stream* operator->() noexcept { return &s_; }
        stream& operator*() noexcept { return s_; }
        /// True if the connection had been used before (it came from the pool).
        bool reused() const noexcept { return reused_; }
        /// Gives the connection back to its pool for another get() on the vCPU it was got on
        /// (it is closed instead if the pool is gone, or off a vCPU). If the key already has
        /// max_idle_per_key idle connections there, the oldest is closed. The lease is empty
        /// afterwards.
        void release() noexcept;
        /// Closes the connection now. Errors: those of close(2) (the fd is gone either way).
        result<void> close() noexcept;

    private:
        friend class socket_pool;
        lease(std::shared_ptr<detail::pool_core> core, std::string key, stream s, int vcpu, bool reused)
            : core_(std::move(core)), key_(std::move(key)), s_(std::move(s)), vcpu_(vcpu), reused_(reused) {}
        std::shared_ptr<detail::pool_core> core_;
        std::string key_;
        stream s_;
        int vcpu_ = -1;  // the index of the vCPU it was got on
        bool reused_ = false;
    };

    explicit socket_pool(const pool_options& opts = {});
    /// Closes the idle connections. Leases still out stay valid; releasing them closes them.
    ~socket_pool();
    socket_pool(const socket_pool&) = delete;
    socket_pool& operator=(const socket_pool&) = delete;

    /// A connection to host:port (a name or an IP literal, see net::resolve); pooled under the
    /// name as given (case-insensitive), not under the address it resolved to. Call on a vCPU.
    /// Errors: those of net::connect (dns_category() codes, ECONNREFUSED, ETIMEDOUT,
    /// ECANCELED, ...); EPERM outside a vCPU.
    result<lease> get(std::string_view host, uint16_t port);
    /// A connection to addr (TCP or Unix). Errors: those of stream::connect; EPERM outside a
    /// vCPU.
    result<lease> get(const address& addr);

    /// Closes every idle connection, every vCPU's, on the calling thread.
    void clear() noexcept;
    pool_stats stats() const noexcept;

private:
    result<lease> get_keyed(std::string key, const std::function<result<stream>()>& connect);
    std::shared_ptr<detail::pool_core> core_;
};

}  // namespace gluon::net
