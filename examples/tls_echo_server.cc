// A TLS echo server on gluon: net::server runs one fiber per connection, and each fiber does the
// TLS handshake and then echoes with plain blocking code.
//
//   tls_echo_server --cert chain.pem --key key.pem [--port N] [--alpn proto]
//
// Prints "listening <port>" once ready (N = 0 picks a free port). SIGINT/SIGTERM stop it. Try:
//   openssl s_client -connect 127.0.0.1:<port> -quiet
#include <signal.h>
#include <sys/signalfd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gluon/net/server.h"
#include "gluon/net/tls.h"
#include "gluon/runtime/fd.h"
#include "gluon/runtime/fiber.h"

using namespace gluon;
using namespace std::chrono_literals;

namespace {

void serve(net::stream& sock, const net::tls::context& ctx) {
    // A client that never finishes its handshake must not hold a fiber forever.
    auto s = net::tls::stream::accept(std::move(sock), ctx, 10s);
    if (!s) {
        std::fprintf(stderr, "tls_echo_server: %s\n", net::tls::last_error_message().c_str());
        return;
    }
    char buf[16 * 1024];
    for (;;) {
        auto n = s->recv_some(buf, sizeof buf);
        if (!n || *n == 0) break;  // error, or the client's close_notify
        if (!s->send_all(buf, *n)) return;
    }
    (void)s->shutdown(1s);
}

int usage() {
    std::fprintf(stderr,
                 "usage: tls_echo_server --cert FILE --key FILE [--port N] [--alpn PROTO]\n");
    return 2;
}

}  // namespace

int main(int argc, char** argv) {
    int port = 0;
    net::tls::context_options opts;
    for (int i = 1; i < argc; ++i) {
        const bool has_value = i + 1 < argc;
        if (!std::strcmp(argv[i], "--port") && has_value)
            port = std::atoi(argv[++i]);
        else if (!std::strcmp(argv[i], "--cert") && has_value)
            opts.cert_chain_file = argv[++i];
        else if (!std::strcmp(argv[i], "--key") && has_value)
            opts.private_key_file = argv[++i];
        else if (!std::strcmp(argv[i], "--alpn") && has_value)
            opts.alpn.emplace_back(argv[++i]);
        else
            return usage();
    }
    if (opts.cert_chain_file.empty() || opts.private_key_file.empty()) return usage();

    auto ctx = net::tls::context::make_server(opts);
    if (!ctx) {
        std::fprintf(stderr, "tls_echo_server: %s\n", net::tls::last_error_message().c_str());
        return 1;
    }
    if (auto r = init(); !r) {
        std::fprintf(stderr, "tls_echo_server: init: %s\n", r.error().message().c_str());
        return 1;
    }
    // Signals arrive as a readable fd, so a fiber waits for them like for any other I/O.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, nullptr);
    int sfd = ::signalfd(-1, &set, SFD_CLOEXEC);

    auto srv = net::server::start(net::address::ipv4_loopback(static_cast<uint16_t>(port)),
                                  [&ctx](net::stream& s) { serve(s, *ctx); });
    if (!srv) {
        std::fprintf(stderr, "tls_echo_server: listen: %s\n", srv.error().message().c_str());
        return 1;
    }
    std::printf("listening %d\n", (*srv)->local_address().port());
    std::fflush(stdout);
    signalfd_siginfo si;
    (void)fd::read_exactly(sfd, &si, sizeof si);
    (*srv)->stop(1s);
    srv->reset();
    (void)fini();
    return 0;
}
