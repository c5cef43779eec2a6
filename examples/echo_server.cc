// An echo server on gluon: one fiber per connection (net::server), plain blocking code. With a
// certificate it is the same server over TLS: the handler takes a byte_stream, and the listener
// runs a TLS handshake on each accepted socket first (net::tls::server_wrap).
//
//   echo_server [--port N] [--engine io_uring|epoll] [--cert chain.pem --key key.pem [--alpn P]]
//
// Prints "listening <port>" once ready (N = 0 picks a free port). SIGINT/SIGTERM stop it. Try:
//   openssl s_client -connect 127.0.0.1:<port> -quiet      (with --cert/--key)
#include <cstdio>
#include <memory>

#include "gluon/net/server.h"
#include "gluon/net/tls.h"
#include "gluon/runtime/cli.h"
#include "gluon/runtime/signals.h"
#include "gluon/runtime/vcpu.h"

using namespace gluon;
using namespace std::chrono_literals;

namespace {

void echo(net::byte_stream& s) {
    char small[1024];
    std::unique_ptr<char[]> big;
    char* buf = small;
    size_t cap = sizeof small;
    for (;;) {
        auto n = s.read_some(buf, cap);
        if (!n || *n == 0) break;  // error, or the peer closed (TLS: its close_notify)
        if (!s.write_all(buf, *n)) return;
        if (*n == cap && !big) {  // a stream, not a chat: read it in large pieces from now on
            cap = 64 * 1024;
            big = std::make_unique<char[]>(cap);
            buf = big.get();
        }
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
    return serve_until_signalled(*srv, 1s);
}

}  // namespace

int main(int argc, char** argv) {
    config c;
    cli::parser p("usage: echo_server [--port N] [--engine io_uring|epoll] [--cert FILE --key FILE [--alpn PROTO]]");
    p.option("--port", c.port).engine(c.vcpu);
    p.option("--cert", c.tls.cert_chain_file).option("--key", c.tls.private_key_file).option("--alpn", c.tls.alpn);
    if (!p.parse(argc, argv) || c.tls.cert_chain_file.empty() != c.tls.private_key_file.empty()) return p.usage();
    auto r = run(c.vcpu, [&] { return serve(c); });
    if (!r) std::fprintf(stderr, "echo_server: %s\n", r.error().message().c_str());
    return r ? 0 : 1;
}
