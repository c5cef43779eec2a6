// A WebSocket echo server and client on gluon. The server upgrades one route of an ordinary
// HTTP server; each connection is a fiber running a plain receive-and-send loop.
//
//   websocket_echo [--port N]           serve ws://127.0.0.1:N/echo (N = 0 picks a free port),
//                                       and gluon's counters at http://127.0.0.1:N/metrics
//   websocket_echo --connect URL TEXT   send TEXT to a WebSocket echo server, print the answer
//   websocket_echo --self-test          both in one process: serve, connect, check the echo
//
// Prints "listening <port>" once ready; SIGINT/SIGTERM stop the server. Try it with any client,
// e.g. python3 -m websockets ws://127.0.0.1:<port>/echo
#include <signal.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "gluon/http/metrics.h"
#include "gluon/http/router.h"
#include "gluon/http/websocket.h"
#include "gluon/runtime/cli.h"
#include "gluon/runtime/signals.h"
#include "gluon/runtime/vcpu.h"

using namespace gluon;
using namespace std::chrono_literals;

namespace {

// The route: accept the upgrade, then echo each message until the peer closes. The loop only
// alternates recv and send, so answers to a burst of messages may leave in one write
// (coalesce_sends: recv flushes them before it waits).
void echo(http::request& req, http::response& res) {
    http::websocket_options o;
    o.coalesce_sends = true;
    auto ws = http::websocket::accept(req, res, o);
    if (!ws) return;  // not an upgrade: res already holds the 400/426 answer
    http::websocket::message m;
    while (ws->recv(m)) {
        auto sent = m.is_text() ? ws->send_text(m.data, 10s) : ws->send_binary(m.data, 10s);
        if (!sent) return;
    }
    // recv failed: the peer closed (ENODATA, answered already) or broke the protocol (the
    // connection was failed with the RFC's close code). Either way the connection is done.
}

result<std::unique_ptr<http::server>> start(uint16_t port) {
    static http::router routes;  // outlives the server
    routes.get("/echo", echo);
    routes.get("/metrics", http::metrics_handler());  // Prometheus text format
    http::server_options so;
    return http::server::start(net::address::ipv4_loopback(port), routes.as_handler(), so);
}

result<std::string> ask(const std::string& url, const std::string& text) {
    auto ws = GLUON_TRY(http::websocket::connect(url));
    GLUON_TRY(ws.send_text(text, 10s));
    auto m = GLUON_TRY(ws.recv(10s));
    GLUON_TRY(ws.close(http::close_code::normal, "bye", 5s));
    return std::move(m.data);
}

result<int> run_mode(int argc, char** argv) {
    if (argc == 4 && std::strcmp(argv[1], "--connect") == 0) {
        auto answer = GLUON_TRY(ask(argv[2], argv[3]));
        std::printf("%s\n", answer.c_str());
        return 0;
    }
    if (argc == 2 && std::strcmp(argv[1], "--self-test") == 0) {
        auto srv = GLUON_TRY(start(0));
        std::string url = "ws://127.0.0.1:" + std::to_string(srv->local_address().port()) + "/echo";
        auto answer = GLUON_TRY(ask(url, "hello, websocket"));
        std::printf("echo: %s\n", answer.c_str());
        return answer == "hello, websocket" ? 0 : 1;
    }
    uint16_t port = 0;
    cli::parser p("usage: websocket_echo [--port N] | --connect URL TEXT | --self-test");
    p.option("--port", port);
    if (!p.parse(argc, argv)) return p.usage();
    auto srv = GLUON_TRY(start(port));
    GLUON_TRY(serve_until_signalled(*srv, 5s));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    auto r = run({}, [&] { return run_mode(argc, argv); });
    if (!r) std::fprintf(stderr, "websocket_echo: %s\n", r.error().message().c_str());
    return r.value_or(1);
}
