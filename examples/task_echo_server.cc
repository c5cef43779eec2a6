// An echo server written with C++20 tasks: one task per connection, no stack and no receive
// buffer per connection, co_await at every suspension point. The same vCPU could run fibers
// beside it.
//
//   task_echo_server [--port N] [--engine io_uring|epoll]
//
// Prints "listening <port>" once ready (N = 0 picks a free port). SIGINT/SIGTERM stop it: the
// acceptor is cancelled (its accept ends with ECANCELED), and the connections still open are
// cancelled when the vCPU shuts down.
#include <netinet/in.h>
#include <netinet/tcp.h>

#include <cstdio>
#include <stop_token>

#include "gluon/net/socket.h"
#include "gluon/runtime/cli.h"
#include "gluon/runtime/fd.h"
#include "gluon/runtime/signals.h"
#include "gluon/runtime/vcpu.h"
#include "gluon/task/io.h"
#include "gluon/task/spawn.h"

using namespace gluon;

namespace {

// Each message arrives in a buffer of the engine's pool, taken only when the data is there: an
// idle connection costs its small frame and nothing else.
task<void> session(int fd) {
    for (;;) {
        auto got = co_await co::recv_pooled_ahead(fd);
        if (!got || got->empty()) break;  // error, cancelled, or the peer closed
        if (!co_await co::send_all(fd, got->data(), got->size())) break;
    }
    (void)fd::close(fd);
}

task<void> acceptor(int listen_fd) {
    for (;;) {
        auto c = co_await co::accept(listen_fd);
        if (!c) {
            if (c.error() == std::errc::operation_canceled) co_return;
            continue;  // EMFILE and the like: keep serving the connections we have
        }
        const int one = 1;
        (void)::setsockopt(*c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (auto s = co_spawn(session(*c))) s->detach();
    }
}

// What serve_until_signalled stops: the acceptor task, cancelled through its stop_token.
struct task_server {
    net::address local;
    std::stop_source stop_source;
    join_handle<void> acceptor;
    net::address local_address() const { return local; }
    void stop(duration) {
        stop_source.request_stop();
        acceptor.join();
    }
};

result<void> serve(uint16_t port) {
    auto l = GLUON_TRY(net::listener::listen(net::address::ipv4_loopback(port)));
    task_server srv{GLUON_TRY(l.local_address()), {}, {}};
    srv.acceptor = GLUON_TRY(co_spawn(acceptor(l.get()), {.stop = srv.stop_source.get_token()}));
    return serve_until_signalled(srv, std::chrono::seconds(1));
}

}  // namespace

int main(int argc, char** argv) {
    uint16_t port = 0;
    init_options vcpu;
    cli::parser p("usage: task_echo_server [--port N] [--engine io_uring|epoll]");
    p.option("--port", port).engine(vcpu);
    if (!p.parse(argc, argv)) return p.usage();
    auto r = run(vcpu, [&] { return serve(port); });
    if (!r) std::fprintf(stderr, "task_echo_server: %s\n", r.error().message().c_str());
    return r ? 0 : 1;
}
