// The gluon side of the connection-rate benchmark (B7): answers every connection's request
// with a fixed short HTTP/1.0 response and closes it (a fiber per connection).
//
//   connrate_server [--port N] [--vcpus N] [--mode sharded|shared] [--engine io_uring|epoll]
//
// sharded: net::sharded_server, a SO_REUSEPORT listener per vCPU with CPU steering.
// shared:  one listening socket: net::server on vCPU 0; every other vCPU runs an accept fiber
//          of its own on the same socket (the kernel wakes one acceptor per connection).
// Listens on the wildcard address; prints "listening <port>" once ready. SIGINT/SIGTERM stop it.
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "gluon/net/server.h"
#include "gluon/net/sharded_server.h"
#include "gluon/runtime/fd.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/runtime.h"

using namespace gluon;

namespace {

constexpr char kResponse[] =
    "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n";

void answer(net::byte_stream& s) {
    char buf[1024];
    size_t got = 0;
    // The request ends with an empty line; it comes in one segment in practice.
    while (got < sizeof buf) {
        auto n = s.read_some(buf + got, sizeof buf - got);
        if (!n || *n == 0) return;
        got += *n;
        if (std::string_view(buf, got).find("\r\n\r\n") != std::string_view::npos) break;
    }
    (void)s.write_all(kResponse, sizeof kResponse - 1);
}

// An extra acceptor on a listening socket that another vCPU's net::server owns.
void accept_loop(int lfd, std::atomic<uint64_t>& live) {
    for (;;) {
        auto c = fd::accept(lfd);
        if (!c) {
            if (c.error() == std::errc::operation_canceled) return;
            (void)this_fiber::sleep_for(std::chrono::milliseconds(1));
            continue;
        }
        live.fetch_add(1, std::memory_order_relaxed);
        auto f = spawn([fd = *c, &live] {
            net::stream s(fd);
            (void)s.set_nodelay(true);
            answer(s);
            (void)s.close();
            live.fetch_sub(1, std::memory_order_relaxed);
        });
        if (f) {
            (void)f->detach();
        } else {
            (void)fd::close(*c);
            live.fetch_sub(1, std::memory_order_relaxed);
        }
    }
}

[[noreturn]] void usage() {
    std::fprintf(stderr,
                 "usage: connrate_server [--port N] [--vcpus N] [--mode sharded|shared] "
                 "[--engine io_uring|epoll]\n");
    std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
    int port = 0;
    unsigned vcpus = 1;
    bool sharded = true;
    runtime_options ro;
    for (int i = 1; i < argc; ++i) {
        const bool has = i + 1 < argc;
        if (!std::strcmp(argv[i], "--port") && has) {
            port = std::atoi(argv[++i]);
        } else if (!std::strcmp(argv[i], "--vcpus") && has) {
            vcpus = static_cast<unsigned>(std::atoi(argv[++i]));
        } else if (!std::strcmp(argv[i], "--mode") && has) {
            std::string_view m = argv[++i];
            if (m != "sharded" && m != "shared") usage();
            sharded = m == "sharded";
        } else if (!std::strcmp(argv[i], "--engine") && has) {
            auto k = engine::parse_kind(argv[++i]);
            if (!k) usage();
            ro.vcpu.engine = *k;
        } else {
            usage();
        }
    }
    if (vcpus < 1) usage();
    ro.vcpus = vcpus;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);  // before the vCPU threads inherit the mask

    auto rt = runtime::start(ro);
    if (!rt) {
        std::fprintf(stderr, "connrate_server: runtime: %s\n", rt.error().message().c_str());
        return 1;
    }
    auto any = net::address::parse("0.0.0.0:" + std::to_string(port));
    if (!any) usage();
    std::unique_ptr<net::sharded_server> sh;
    std::unique_ptr<net::server> shared;
    std::vector<fiber*> extra(vcpus, nullptr);
    std::atomic<uint64_t> extra_live{0};
    uint16_t bound = 0;
    if (sharded) {
        auto s = net::sharded_server::start(**rt, *any, answer);
        if (!s) {
            std::fprintf(stderr, "connrate_server: listen: %s\n", s.error().message().c_str());
            return 1;
        }
        sh = std::move(*s);
        bound = sh->local_address().port();
    } else {
        std::error_code err;
        (void)(*rt)->run(0, [&] {
            auto s = net::server::start(*any, answer);
            if (!s) {
                err = s.error();
                return;
            }
            shared = std::move(*s);
        });
        if (err) {
            std::fprintf(stderr, "connrate_server: listen: %s\n", err.message().c_str());
            return 1;
        }
        bound = shared->local_address().port();
        for (unsigned i = 1; i < vcpus; ++i) {
            (void)(*rt)->run(i, [&, i] {
                auto f = spawn(fiber_options{.name = "accept"},
                               [lfd = shared->listen_fd(), &extra_live] { accept_loop(lfd, extra_live); });
                if (f) extra[i] = new fiber(std::move(*f));
            });
        }
    }
    std::printf("listening %u\n", bound);
    std::fflush(stdout);
    int sig = 0;
    sigwait(&set, &sig);
    if (sh) sh->stop(std::chrono::seconds(1));
    for (unsigned i = 1; i < vcpus; ++i) {
        if (!extra[i]) continue;
        (void)(*rt)->run(i, [&, i] {
            (void)extra[i]->interrupt();
            (void)extra[i]->join();
            delete extra[i];
        });
    }
    if (shared) (void)(*rt)->run(0, [&] { shared->stop(std::chrono::seconds(1)); shared.reset(); });
    sh.reset();
    rt->reset();
    return 0;
}
