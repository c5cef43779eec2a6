// An echo server on gluon: one fiber per connection (net::server), plain blocking code. With a
// certificate it is the same server over TLS: the handler takes a byte_stream, and the listener
// runs a TLS handshake on each accepted socket first (net::tls::server_wrap).
//
//   echo_server [--port N] [--engine io_uring|epoll] [--cert chain.pem --key key.pem [--alpn P]]
//
// Prints "listening <port>" once ready (N = 0 picks a free port). SIGINT/SIGTERM stop it. Try:
//   openssl s_client -connect 127.0.0.1:<port> -quiet      (with --cert/--key)
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gluon/net/server.h"
#include "gluon/net/tls.h"
#include "gluon/runtime/signals.h"
#include "gluon/runtime/vcpu.h"

using namespace gluon;
using namespace std::chrono_literals;

namespace {

void echo(net::byte_stream& s) {
    char buf[64 * 1024];
    for (;;) {
        auto n = s.read_some(buf, sizeof buf);
        if (!n || *n == 0) break;  // error, or the peer closed (TLS: its close_notify)
        if (!s.write_all(buf, *n)) return;
    }
    (void)s.shutdown(1s);
}

struct config {
    uint16_t port = 0;
    init_options vcpu;
    net::tls::context_options tls;
};

result<void> serve(const config& c) {
    net::server_options o;
    if (!c.tls.cert_chain_file.empty()) {
        auto ctx = net::tls::context::make_server(c.tls);
        if (!ctx) {
            std::fprintf(stderr, "echo_server: %s\n", net::tls::last_error_message().c_str());
            return unexpected(ctx.error());
        }
        // A client that never finishes its handshake must not hold a fiber forever.
        o.wrap = net::tls::server_wrap(*ctx, 10s);
    }
    auto srv = GLUON_TRY(net::server::start(net::address::ipv4_loopback(c.port), echo, o));
    std::printf("listening %d\n", srv->local_address().port());
    std::fflush(stdout);
    GLUON_TRY(wait_for_signals({SIGINT, SIGTERM}));
    srv->stop(1s);
    return {};
}

int usage() {
    std::fprintf(stderr, "usage: echo_server [--port N] [--engine io_uring|epoll] "
                         "[--cert FILE --key FILE [--alpn PROTO]]\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    config c;
    for (int i = 1; i < argc; ++i) {
        const bool has_value = i + 1 < argc;
        if (!std::strcmp(argv[i], "--port") && has_value) {
            c.port = static_cast<uint16_t>(std::atoi(argv[++i]));
        } else if (!std::strcmp(argv[i], "--engine") && has_value) {
            c.vcpu.engine = engine::parse_kind(argv[++i]);
            if (!c.vcpu.engine) return usage();
        } else if (!std::strcmp(argv[i], "--cert") && has_value) {
            c.tls.cert_chain_file = argv[++i];
        } else if (!std::strcmp(argv[i], "--key") && has_value) {
            c.tls.private_key_file = argv[++i];
        } else if (!std::strcmp(argv[i], "--alpn") && has_value) {
            c.tls.alpn.emplace_back(argv[++i]);
        } else {
            return usage();
        }
    }
    if (c.tls.cert_chain_file.empty() != c.tls.private_key_file.empty()) return usage();
    auto r = run(c.vcpu, [&] { return serve(c); });
    if (!r) std::fprintf(stderr, "echo_server: %s\n", r.error().message().c_str());
    return r ? 0 : 1;
}
