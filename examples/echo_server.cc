// A TCP echo server on gluon: one fiber per connection (net::server), plain blocking code.
//
//   echo_server [--port N] [--engine io_uring|epoll]
//
// Prints "listening <port>" once ready (N = 0 picks a free port). SIGINT/SIGTERM stop it.
#include <signal.h>
#include <sys/signalfd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gluon/net/server.h"
#include "gluon/runtime/fd.h"
#include "gluon/runtime/fiber.h"

using namespace gluon;

namespace {

void echo(net::stream& s) {
    char buf[64 * 1024];
    for (;;) {
        auto n = s.recv_some(buf, sizeof buf);
        if (!n || *n == 0) return;  // error or peer closed
        if (!s.send_all(buf, *n)) return;
    }
}

}  // namespace

int main(int argc, char** argv) {
    int port = 0;
    init_options opts;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--port") && i + 1 < argc) {
            port = std::atoi(argv[++i]);
        } else if (!std::strcmp(argv[i], "--engine") && i + 1 < argc) {
            auto k = engine::parse_kind(argv[++i]);
            if (!k) {
                std::fprintf(stderr, "echo_server: unknown engine '%s'\n", argv[i]);
                return 2;
            }
            opts.engine = *k;
        } else {
            std::fprintf(stderr, "usage: echo_server [--port N] [--engine io_uring|epoll]\n");
            return 2;
        }
    }
    if (auto r = init(opts); !r) {
        std::fprintf(stderr, "echo_server: init: %s\n", r.error().message().c_str());
        return 1;
    }
    // Signals arrive as a readable fd, so a fiber waits for them like for any other I/O.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigprocmask(SIG_BLOCK, &set, nullptr);
    int sfd = ::signalfd(-1, &set, SFD_CLOEXEC);

    auto srv = net::server::start(net::address::ipv4_loopback(static_cast<uint16_t>(port)), echo);
    if (!srv) {
        std::fprintf(stderr, "echo_server: listen: %s\n", srv.error().message().c_str());
        return 1;
    }
    std::printf("listening %d\n", (*srv)->local_address().port());
    std::fflush(stdout);
    signalfd_siginfo si;
    (void)fd::read_exactly(sfd, &si, sizeof si);
    (*srv)->stop(std::chrono::seconds(1));
    srv->reset();
    (void)fini();
    return 0;
}
