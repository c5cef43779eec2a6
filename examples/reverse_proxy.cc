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
#include <cstdio>

#include "gluon/http/proxy.h"
#include "gluon/http/server.h"
#include "gluon/runtime/cli.h"
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
    return serve_until_signalled(*srv, 5s);
}

}  // namespace

int main(int argc, char** argv) {
    config c;
    bool least_busy = false;
    cli::parser p("usage: reverse_proxy --upstream HOST:PORT [--upstream HOST:PORT ...] [--port N] [--least-busy]\n"
                  "                     [--keepalive N] [--engine io_uring|epoll] [--access-log]\n"
                  "       reverse_proxy --forward [--port N] [--engine io_uring|epoll]");
    p.option("--port", c.port).option("--upstream", c.proxy.upstreams).flag("--least-busy", least_busy);
    p.option("--keepalive", c.proxy.max_idle_per_upstream).flag("--forward", c.forward);
    p.engine(c.vcpu).flag("--access-log", c.access_log);
    if (!p.parse(argc, argv) || c.forward == !c.proxy.upstreams.empty()) return p.usage();
    if (least_busy) c.proxy.balancing = http::proxy_options::balance::least_busy;
    auto r = run(c.vcpu, [&] { return serve(c); });
    if (!r) std::fprintf(stderr, "reverse_proxy: %s\n", r.error().message().c_str());
    return r ? 0 : 1;
}
