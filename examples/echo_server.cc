// A TCP echo server on gluon: one fiber per connection, written as plain blocking code.
//
//   echo_server [--port N] [--engine io_uring|epoll]
//
// Prints "listening <port>" once ready (N = 0 picks a free port). SIGINT/SIGTERM stop it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "gluon/runtime/fd.h"
#include "gluon/runtime/fiber.h"

using namespace gluon;

namespace {

void serve(int conn) {
    int one = 1;
    ::setsockopt(conn, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char buf[64 * 1024];
    for (;;) {
        auto n = fd::recv_some(conn, buf, sizeof buf);
        if (!n || *n == 0) break;  // error or peer closed
        if (!fd::write_all(conn, buf, *n)) break;
    }
    (void)fd::close(conn);
}

int listen_on(int port) {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) < 0 || ::listen(s, 4096) < 0) {
        std::perror("echo_server: bind/listen");
        std::exit(1);
    }
    socklen_t len = sizeof a;
    ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
    std::printf("listening %d\n", ntohs(a.sin_port));
    std::fflush(stdout);
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    int port = 0;
    init_options opts;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--port") && i + 1 < argc) {
            port = std::atoi(argv[++i]);
        } else if (!std::strcmp(argv[i], "--engine") && i + 1 < argc) {
            engine::kind k;
            if (!engine::parse_kind(argv[++i], k)) {
                std::fprintf(stderr, "echo_server: unknown engine '%s'\n", argv[i]);
                return 2;
            }
            opts.engine = k;
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

    int ls = listen_on(port);
    auto acceptor = spawn([ls] {
        for (;;) {
            auto c = fd::accept(ls);
            if (!c) {
                if (c.error() == std::errc::operation_canceled) return;
                (void)this_fiber::sleep_for(std::chrono::milliseconds(1));  // EMFILE & co: back off
                continue;
            }
            if (auto f = spawn(serve, *c); f)
                (void)f->detach();
            else
                (void)fd::close(*c);
        }
    });
    signalfd_siginfo si;
    (void)fd::read_exactly(sfd, &si, sizeof si);
    (void)acceptor->interrupt();
    (void)acceptor->join();
    (void)fd::close(ls);
    (void)fini();  // interrupts the connection fibers and lets them finish
    return 0;
}
