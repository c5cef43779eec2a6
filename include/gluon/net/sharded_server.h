// A sharded server: one SO_REUSEPORT listener per vCPU of a runtime, with a reuseport CBPF
// program that hands each connection to the listener of the CPU that received it (the
// Fastsocket idea in user space). With vCPU i pinned to CPU i (runtime's default), a connection
// is accepted and served on the core whose softirq processed it: no cross-core traffic.
#pragma once

#include <memory>
#include <vector>

#include "gluon/net/server.h"
#include "gluon/runtime/runtime.h"

namespace gluon::net {

class sharded_server {
public:
    /// Starts one server per vCPU of rt on addr (port 0: one free port shared by all shards).
    /// Errors: those of listener::listen and setsockopt(SO_ATTACH_REUSEPORT_CBPF).
    static result<std::unique_ptr<sharded_server>> start(runtime& rt, const address& addr,
                                                         server::handler h,
                                                         const server_options& opts = {});
    /// Stops every shard (see server::stop).
    ~sharded_server();
    /// Every shard stops accepting first, then the handlers of all shards share one `grace`
    /// (see server::stop): the whole stop takes about grace, however many shards there are.
    void stop(duration grace = forever) noexcept;

    const address& local_address() const noexcept { return local_; }
    /// Connections accepted by shard i.
    uint64_t accepted(unsigned shard) const noexcept;

private:
    sharded_server() = default;
    runtime* rt_ = nullptr;
    address local_;
    std::vector<std::unique_ptr<server>> shards_;
};

}  // namespace gluon::net
