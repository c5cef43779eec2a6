// An HTTP/1.1 server on gluon: a directory served as static files, and one dynamic route. Each
// connection runs in its own fiber; handlers are plain blocking functions. With a certificate it
// serves HTTPS: the same server over the TLS wrap.
//
//   http_server --root DIR [--port N] [--engine io_uring|epoll] [--cert chain.pem --key key.pem]
//               [--access-log]
//
// Prints "listening <port>" once ready (N = 0 picks a free port). SIGINT/SIGTERM stop it
// gracefully. Try:
//   curl -v http://127.0.0.1:<port>/hello
//   curl -v http://127.0.0.1:<port>/<a file under DIR>
#include <cstdio>

#include "gluon/http/router.h"
#include "gluon/http/static_files.h"
#include "gluon/net/tls.h"
#include "gluon/runtime/cli.h"
#include "gluon/runtime/signals.h"
#include "gluon/runtime/vcpu.h"

using namespace gluon;
using namespace std::chrono_literals;

namespace {

struct config {
    uint16_t port = 0;
    std::string root;
    bool access_log = false;
    init_options vcpu;
    net::tls::context_options tls;
};

result<void> serve(config c) {
    http::server_options o;
    o.access_log = c.access_log;
    o.max_requests_per_connection = 0;
    if (!c.tls.cert_chain_file.empty()) {
        c.tls.alpn = {"h2", "http/1.1"};
        auto ctx = net::tls::context::make_server(c.tls);
        if (!ctx) {
            std::fprintf(stderr, "http_server: %s\n", net::tls::last_error_message().c_str());
            return unexpected(ctx.error());
        }
        o.wrap = net::tls::server_wrap(*ctx, 10s);
    }
    auto files = http::static_files(c.root);
    if (!files) {
        std::fprintf(stderr, "http_server: %s: %s\n", c.root.c_str(), files.error().message().c_str());
        return unexpected(files.error());
    }
    http::router routes;
    routes.get("/hello", [](http::request&, http::response& res) {
        res.content_type("text/plain");
        res.body("Hello, World!");
    });
    routes.get("/*", *files);

    auto srv = GLUON_TRY(http::server::start(net::address::ipv4_loopback(c.port), routes.as_handler(), o));
    return serve_until_signalled(*srv, 5s);
}

}  // namespace

int main(int argc, char** argv) {
    config c;
    cli::parser p("usage: http_server --root DIR [--port N] [--engine io_uring|epoll] [--cert FILE --key FILE] [--access-log]");
    p.option("--port", c.port).option("--root", c.root).engine(c.vcpu).flag("--access-log", c.access_log);
    p.option("--cert", c.tls.cert_chain_file).option("--key", c.tls.private_key_file);
    if (!p.parse(argc, argv) || c.root.empty() || c.tls.cert_chain_file.empty() != c.tls.private_key_file.empty())
        return p.usage();
    auto r = run(c.vcpu, [&] { return serve(c); });
    if (!r) std::fprintf(stderr, "http_server: %s\n", r.error().message().c_str());
    return r ? 0 : 1;
}
