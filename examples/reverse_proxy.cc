// A reverse proxy on gluon: every request goes to one of the upstreams, over pooled keep-alive
// connections, with bodies streamed both ways. Clients may speak HTTP/1.1 or HTTP/2 (prior
// knowledge); upstreams are HTTP/1.1. With --forward it is a forward proxy instead (absolute-form
// requests and CONNECT tunnels to port 443).
//
//   reverse_proxy --upstream HOST:PORT [--upstream HOST:PORT ...] [--port N] [--least-busy]
//                 [--keepalive N] [--engine io_uring|epoll] [--access-log]
//   reverse_proxy --forward [--port N] [--engine io_uring|epoll]
//
// Prints "listening <port>" once ready (N = 0 picks a free port). SIGINT/SIGTERM stop it
// gracefully. Try, with any HTTP server on port 8080:
//   reverse_proxy --upstream 127.0.0.1:8080 --port 8000
//   curl -v http://127.0.0.1:8000/
//   reverse_proxy --forward --port 3128
//   curl -x http://127.0.0.1:3128 https://example.com/
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gluon/http/proxy.h"
#include "gluon/http/server.h"
#include "gluon/runtime/signals.h"
#include "gluon/runtime/vcpu.h"

using namespace gluon;
using namespace std::chrono_literals;

namespace {

struct config {
    uint16_t port = 0;
    bool forward = false;
    bool access_log = false;
    http::proxy_options proxy;
    init_options vcpu;
};

result<void> serve(config c) {
    http::server_options o;
    o.access_log = c.access_log;
    o.max_body_bytes = uint64_t{1} << 40;  // bodies are streamed through, not held
    http::handler h = c.forward ? http::forward_proxy({}) : http::reverse_proxy(c.proxy);
    auto srv = GLUON_TRY(http::server::start(net::address::ipv4_loopback(c.port), std::move(h), o));
    std::printf("listening %d\n", srv->local_address().port());
    std::fflush(stdout);
    GLUON_TRY(wait_for_signals({SIGINT, SIGTERM}));
    srv->stop(5s);
    return {};
}

int usage() {
    std::fprintf(stderr, "usage: reverse_proxy --upstream HOST:PORT [--upstream HOST:PORT ...] [--port N] "
                         "[--least-busy] [--keepalive N] [--engine io_uring|epoll] [--access-log]\n"
                         "       reverse_proxy --forward [--port N] [--engine io_uring|epoll]\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    config c;
    for (int i = 1; i < argc; ++i) {
        const bool has_value = i + 1 < argc;
        if (!std::strcmp(argv[i], "--port") && has_value) {
            c.port = static_cast<uint16_t>(std::atoi(argv[++i]));
        } else if (!std::strcmp(argv[i], "--upstream") && has_value) {
            c.proxy.upstreams.emplace_back(argv[++i]);
        } else if (!std::strcmp(argv[i], "--least-busy")) {
            c.proxy.balancing = http::proxy_options::balance::least_busy;
        } else if (!std::strcmp(argv[i], "--keepalive") && has_value) {
            c.proxy.max_idle_per_upstream = static_cast<size_t>(std::atoi(argv[++i]));
        } else if (!std::strcmp(argv[i], "--forward")) {
            c.forward = true;
        } else if (!std::strcmp(argv[i], "--engine") && has_value) {
            c.vcpu.engine = engine::parse_kind(argv[++i]);
            if (!c.vcpu.engine) return usage();
        } else if (!std::strcmp(argv[i], "--access-log")) {
            c.access_log = true;
        } else {
            return usage();
        }
    }
    if (c.forward == !c.proxy.upstreams.empty()) return usage();
    auto r = run(c.vcpu, [&] { return serve(c); });
    if (!r) std::fprintf(stderr, "reverse_proxy: %s\n", r.error().message().c_str());
    return r ? 0 : 1;
}
