#include "gluon/posix.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/close_range.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gluon/engine/engine.h"
#include "gluon/runtime/fd.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu.h"
#include "test_support.h"

namespace gluon {
namespace {

using namespace std::chrono_literals;

// A listening TCP socket on a free loopback port, a connected client and the accepted peer.
struct tcp_pair {
    int listener = -1, client = -1, server = -1;
    sockaddr_in addr{};
    tcp_pair() {
        listener = posix::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof addr;
        EXPECT_EQ(posix::bind(listener, reinterpret_cast<sockaddr*>(&addr), len), 0);
        EXPECT_EQ(getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
        EXPECT_EQ(posix::listen(listener, 16), 0);
        client = posix::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        EXPECT_EQ(posix::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << strerror(errno);
        server = posix::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        EXPECT_GE(server, 0) << strerror(errno);
    }
    ~tcp_pair() {
        for (int fd : {listener, client, server})
            if (fd >= 0) posix::close(fd);
    }
};

// ---- one table, two APIs: each case fails the same way through posix:: (-1 and errno) and
// through the result<T> API (gluon::fd) --------------------------------------------------------

struct error_case {
    const char* name;
    int expected;
    std::function<void(tcp_pair&)> setup;      // may be empty
    std::function<long(tcp_pair&)> posix_call;  // returns -1 and sets errno
    std::function<int(tcp_pair&)> result_call;  // returns the error_code's value; empty: posix only
};

template <typename T>
int err(const result<T>& r) {
    return r ? 0 : r.error().value();
}

const int k_closed_fd = 1 << 14;  // above anything a test opens

// call(s) on a new TCP socket s, closed after it; call's result, with the errno it left.
long on_new_socket(const std::function<long(int)>& call) {
    int s = posix::socket(AF_INET, SOCK_STREAM, 0);
    long r = call(s);
    int e = errno;
    posix::close(s);
    errno = e;
    return r;
}

std::vector<error_case> error_cases() {
    static char buf[64];
    return {
        {"read_bad_fd", EBADF, {},
         [](tcp_pair&) { return long{posix::read(k_closed_fd, buf, sizeof buf)}; },
         [](tcp_pair&) { return err(fd::read_some(k_closed_fd, buf, sizeof buf)); }},
        {"write_bad_fd", EBADF, {},
         [](tcp_pair&) { return long{posix::write(k_closed_fd, buf, 1)}; },
         [](tcp_pair&) { return err(fd::write_some(k_closed_fd, buf, 1)); }},
        {"send_after_shutdown", EPIPE, [](tcp_pair& p) { ASSERT_EQ(posix::shutdown(p.client, SHUT_WR), 0); },
         [](tcp_pair& p) { return long{posix::send(p.client, buf, 1, 0)}; },
         [](tcp_pair& p) { return err(fd::send_some(p.client, buf, 1)); }},
        {"accept_not_listening", EINVAL, {},
         [](tcp_pair& p) { return long{posix::accept(p.client, nullptr, nullptr)}; },
         [](tcp_pair& p) { return err(fd::accept(p.client)); }},
        {"connect_refused", ECONNREFUSED,
         // Stops p.listener listening; its port stays bound, so no one else can take it.
         [](tcp_pair& p) { ASSERT_EQ(posix::shutdown(p.listener, SHUT_RD), 0); },
         [](tcp_pair& p) {
             return on_new_socket([&](int s) { return long{posix::connect(s, reinterpret_cast<sockaddr*>(&p.addr), sizeof p.addr)}; });
         },
         [](tcp_pair& p) {
             int s = posix::socket(AF_INET, SOCK_STREAM, 0);
             int e = err(fd::connect(s, reinterpret_cast<sockaddr*>(&p.addr), sizeof p.addr));
             posix::close(s);
             return e;
         }},
        {"recv_on_pipe", ENOTSOCK, {},
         [](tcp_pair&) {
             int fds[2];
             EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
             EXPECT_EQ(posix::write(fds[1], "x", 1), 1);
             long r = posix::recv(fds[0], buf, 1, 0);
             int e = errno;
             posix::close(fds[0]);
             posix::close(fds[1]);
             errno = e;
             return r;
         },
         [](tcp_pair&) {
             int fds[2];
             EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
             EXPECT_TRUE(fd::write_all(fds[1], "x", 1));
             int e = err(fd::recv_some(fds[0], buf, 1));
             posix::close(fds[0]);
             posix::close(fds[1]);
             return e;
         }},
        {"pread_on_socket", ESPIPE, {},
         // fd::pread leaves the check to the kernel, and io_uring reads a socket as a stream.
         [](tcp_pair& p) { return long{posix::pread(p.client, buf, 1, 0)}; }, {}},
        {"readv_bad_fd", EBADF, {},
         [](tcp_pair&) {
             iovec v{buf, sizeof buf};
             return long{posix::readv(k_closed_fd, &v, 1)};
         },
         [](tcp_pair&) {
             iovec v{buf, sizeof buf};
             return err(fd::readv(k_closed_fd, &v, 1));
         }},
        {"writev_bad_fd", EBADF, {},
         [](tcp_pair&) {
             iovec v{buf, 1};
             return long{posix::writev(k_closed_fd, &v, 1)};
         },
         [](tcp_pair&) {
             iovec v{buf, 1};
             return err(fd::writev(k_closed_fd, &v, 1));
         }},
        {"close_bad_fd", EBADF, {},
         [](tcp_pair&) { return long{posix::close(k_closed_fd)}; },
         [](tcp_pair&) { return err(fd::close(k_closed_fd)); }},
        {"fsync_on_socket", EINVAL, {},
         [](tcp_pair& p) { return long{posix::fsync(p.client)}; },
         [](tcp_pair& p) { return err(fd::fsync(p.client)); }},
        {"sendfile_from_socket_at_an_offset", ESPIPE, {},
         [](tcp_pair& p) {
             off_t off = 0;
             return long{posix::sendfile(p.client, p.server, &off, 1)};
         },
         {}},
        {"bind_address_in_use", EADDRINUSE, {},
         [](tcp_pair& p) {
             return on_new_socket([&](int s) { return long{posix::bind(s, reinterpret_cast<sockaddr*>(&p.addr), sizeof p.addr)}; });
         },
         {}},
        {"listen_on_connected_socket", EINVAL, {},
         [](tcp_pair& p) { return long{posix::listen(p.client, 8)}; }, {}},
        {"shutdown_bad_fd", EBADF, {},
         [](tcp_pair&) { return long{posix::shutdown(k_closed_fd, SHUT_RDWR)}; }, {}},
        {"select_bad_fd", EBADF, {},
         [](tcp_pair&) {
             fd_set rd;
             FD_ZERO(&rd);
             FD_SET(1000, &rd);  // not open in this process
             timeval zero{};
             return long{posix::select(1001, &rd, nullptr, nullptr, &zero)};
         },
         {}},
        {"epoll_wait_on_a_socket", EINVAL, {},
         [](tcp_pair& p) {
             epoll_event ev[1];
             return long{posix::epoll_wait(p.client, ev, 1, 0)};
         },
         {}},
    };
}

class posix_test : public test::engine_test {};
GLUON_ENGINE_TEST_SUITE(posix_test);

TEST_P(posix_test, shared_error_table) {
    for (const error_case& c : error_cases()) {
        SCOPED_TRACE(c.name);
        {
            tcp_pair p;
            if (c.setup) c.setup(p);
            errno = 0;
            EXPECT_EQ(c.posix_call(p), -1);
            EXPECT_EQ(errno, c.expected) << strerror(errno);
        }
        if (c.result_call) {
            tcp_pair p;
            if (c.setup) c.setup(p);
            EXPECT_EQ(c.result_call(p), c.expected);
        }
    }
}

TEST_P(posix_test, echo_through_every_transfer_call) {
    tcp_pair p;
    auto srv = spawn([&] {
        char b[256];
        ssize_t n = posix::read(p.server, b, sizeof b);
        ASSERT_EQ(n, 5);
        ASSERT_EQ(posix::write(p.server, b, 5), 5);
        iovec v[2] = {{b, 2}, {b + 2, 3}};
        ASSERT_EQ(posix::readv(p.server, v, 2), 5);
        ASSERT_EQ(posix::writev(p.server, v, 2), 5);
        ASSERT_EQ(posix::recv(p.server, b, sizeof b, 0), 5);
        ASSERT_EQ(posix::send(p.server, b, 5, 0), 5);
        msghdr m{};
        iovec one{b, sizeof b};
        m.msg_iov = &one;
        m.msg_iovlen = 1;
        ASSERT_EQ(posix::recvmsg(p.server, &m, 0), 5);
        one.iov_len = 5;
        ASSERT_EQ(posix::sendmsg(p.server, &m, 0), 5);
        sockaddr_in from{};
        socklen_t fl = sizeof from;
        ASSERT_EQ(posix::recvfrom(p.server, b, sizeof b, 0, reinterpret_cast<sockaddr*>(&from), &fl), 5);
        ASSERT_EQ(posix::sendto(p.server, b, 5, 0, nullptr, 0), 5);
    });
    for (int i = 0; i < 5; ++i) {
        char b[8] = {};
        ASSERT_EQ(posix::send(p.client, "hello", 5, 0), 5);
        size_t got = 0;
        while (got < 5) {
            ssize_t n = posix::recv(p.client, b + got, 5 - got, 0);
            ASSERT_GT(n, 0);
            got += static_cast<size_t>(n);
        }
        EXPECT_STREQ(b, "hello");
    }
    ASSERT_TRUE(srv->join());
}

// A read with nothing to read parks only its fiber: the writer on the same vCPU still runs.
TEST_P(posix_test, blocking_read_parks_only_the_fiber) {
    tcp_pair p;
    char b[4] = {};
    auto reader = spawn([&] { EXPECT_EQ(posix::read(p.server, b, 3), 3); });
    this_fiber::yield();  // the reader is parked now
    EXPECT_EQ(posix::write(p.client, "abc", 3), 3);
    ASSERT_TRUE(reader->join());
    EXPECT_STREQ(b, "abc");
}

// SO_RCVTIMEO and SO_SNDTIMEO bound a parked call as they bound a blocking one: EAGAIN when
// they run out (thread-per-connection servers drop idle clients this way); zero removes them.
TEST_P(posix_test, socket_timeouts_bound_the_waits) {
    using clk = std::chrono::steady_clock;
    tcp_pair p;
    timeval tv{0, 50'000};
    ASSERT_EQ(posix::setsockopt(p.server, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    timeval kernel{};
    socklen_t kl = sizeof kernel;
    ASSERT_EQ(getsockopt(p.server, SOL_SOCKET, SO_RCVTIMEO, &kernel, &kl), 0);
    EXPECT_GE(kernel.tv_usec, 50'000);  // the kernel has it too (rounded up to its clock tick)
    EXPECT_LT(kernel.tv_usec, 70'000);
    char b[8];
    for (auto call : {+[](int fd, char* buf) { return long{posix::read(fd, buf, 8)}; },
                      +[](int fd, char* buf) { return long{posix::recv(fd, buf, 8, 0)}; }}) {
        const auto t0 = clk::now();
        errno = 0;
        EXPECT_EQ(call(p.server, b), -1);
        EXPECT_EQ(errno, EAGAIN);
        const auto waited = clk::now() - t0;
        EXPECT_GE(waited, std::chrono::milliseconds(45));
        EXPECT_LT(waited, std::chrono::seconds(5));
    }
    ASSERT_EQ(posix::write(p.client, "x", 1), 1);
    EXPECT_EQ(posix::read(p.server, b, sizeof b), 1);  // data within the limit reads as usual
    // A send that finds the buffers full waits at most SO_SNDTIMEO.
    ASSERT_EQ(posix::setsockopt(p.client, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv), 0);
    const std::string chunk(1 << 16, 'y');
    long sent;
    int rounds = 0;
    while ((sent = posix::send(p.client, chunk.data(), chunk.size(), 0)) > 0 && ++rounds < 10'000) {
    }
    EXPECT_EQ(sent, -1);
    EXPECT_EQ(errno, EAGAIN);
    // A listener's accept is a receive.
    ASSERT_EQ(posix::setsockopt(p.listener, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    EXPECT_EQ(posix::accept4(p.listener, nullptr, nullptr, SOCK_CLOEXEC), -1);
    EXPECT_EQ(errno, EAGAIN);
    // And the sockets it accepts have its limit.
    int c = posix::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_EQ(posix::connect(c, reinterpret_cast<sockaddr*>(&p.addr), sizeof p.addr), 0);
    int s = posix::accept4(p.listener, nullptr, nullptr, SOCK_CLOEXEC);
    ASSERT_GE(s, 0);
    EXPECT_EQ(posix::read(s, b, 1), -1);
    EXPECT_EQ(errno, EAGAIN);
    posix::close(s);
    posix::close(c);
    // Zero: no limit again; the read waits for its data.
    tcp_pair q;
    timeval zero{};
    ASSERT_EQ(posix::setsockopt(q.server, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv), 0);
    ASSERT_EQ(posix::setsockopt(q.server, SOL_SOCKET, SO_RCVTIMEO, &zero, sizeof zero), 0);
    auto reader = spawn([&] { EXPECT_EQ(posix::read(q.server, b, 1), 1); });
    ASSERT_TRUE(this_fiber::sleep_for(std::chrono::milliseconds(100)));  // past the old limit
    EXPECT_EQ(posix::write(q.client, "z", 1), 1);
    ASSERT_TRUE(reader->join());
}

// Only SO_RCVTIMEO or SO_SNDTIMEO running out is EAGAIN (connect: EINPROGRESS): an ETIMEDOUT
// the kernel reports meanwhile, having given up on the connection, is the call's. Each case
// skips on a kernel that does not give up before the limit (the call then ends with it).
const timeval k_limit{10, 0};
const auto k_ran_out = std::chrono::seconds(k_limit.tv_sec) - std::chrono::milliseconds(50);
const int k_user_timeout_ms = 200;

// A receive parked while the kernel gives up on a send: p.server never reads, so once the
// client's data fills its window the window stays shut, and the kernel gives up after
// TCP_USER_TIMEOUT (Linux 5.11 and later).
TEST_P(posix_test, receive_reports_the_kernels_etimedout) {
    using clk = std::chrono::steady_clock;
    tcp_pair p;
    const int small = 4096;
    ASSERT_EQ(setsockopt(p.server, SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
    ASSERT_EQ(setsockopt(p.client, SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
    ASSERT_EQ(setsockopt(p.client, IPPROTO_TCP, TCP_USER_TIMEOUT, &k_user_timeout_ms, sizeof k_user_timeout_ms), 0);
    ASSERT_EQ(posix::setsockopt(p.client, SOL_SOCKET, SO_RCVTIMEO, &k_limit, sizeof k_limit), 0);
    const std::string chunk(1 << 16, 'w');
    while (posix::send(p.client, chunk.data(), chunk.size(), MSG_DONTWAIT) > 0) {
    }
    ASSERT_EQ(errno, EAGAIN);
    char b[8];
    const auto t0 = clk::now();
    errno = 0;
    EXPECT_EQ(posix::recv(p.client, b, sizeof b, 0), -1);
    const int e = errno;
    if (e == EAGAIN && clk::now() - t0 >= k_ran_out)
        GTEST_SKIP() << "this kernel keeps a connection whose peer's window stays shut";
    EXPECT_EQ(e, ETIMEDOUT) << strerror(e);
}

// The kernel's ETIMEDOUT taken in before the limit, its receiver run after it (the vCPU was busy
// with another fiber): the clock said "the limit", so the call failed with EAGAIN, and as the
// kernel hands its error out once, the next call saw only the end of the stream.
TEST_P(posix_test, a_kernels_etimedout_seen_after_the_limit_stays_etimedout) {
    tcp_pair p;
    const int small = 4096;
    ASSERT_EQ(setsockopt(p.server, SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
    ASSERT_EQ(setsockopt(p.client, SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
    ASSERT_EQ(setsockopt(p.client, IPPROTO_TCP, TCP_USER_TIMEOUT, &k_user_timeout_ms, sizeof k_user_timeout_ms), 0);
    const timeval limit{2, 0};
    ASSERT_EQ(posix::setsockopt(p.client, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit), 0);
    const std::string chunk(1 << 16, 'w');
    while (posix::send(p.client, chunk.data(), chunk.size(), MSG_DONTWAIT) > 0) {
    }
    ASSERT_EQ(errno, EAGAIN);
    int64_t limit_end = 0;
    int e1 = 0, e2 = 0;
    long r2 = 0;
    auto receiver = spawn([&] {
        char b[8];
        limit_end = mono_now_ns() + limit.tv_sec * 1'000'000'000LL;  // (its deadline is a little later)
        errno = 0;
        EXPECT_EQ(posix::recv(p.client, b, sizeof b, 0), -1);
        e1 = errno;
        errno = 0;  // the kernel's error, if that call did not get it
        r2 = posix::recv(p.client, b, sizeof b, MSG_DONTWAIT);
        e2 = errno;
    });
    ASSERT_TRUE(receiver);
    // Its 1 ms timer is due when the vCPU next polls, so it is made ready there before the
    // vCPU takes in the receive's completion: it runs first, and spins past the limit.
    auto ahead = spawn([&] {
        (void)this_fiber::sleep_for(1ms);
        while (mono_now_ns() < limit_end + 50'000'000) {
        }
    });
    ASSERT_TRUE(ahead);
    this_fiber::yield();  // the receive and the sleep park
    // Spin (the vCPU takes nothing in) until the kernel gives up on the connection.
    const int64_t give_up = mono_now_ns() + 1'500'000'000;
    bool closed = false;
    while (!closed && mono_now_ns() < give_up) {
        tcp_info ti{};
        socklen_t len = sizeof ti;
        closed = ::getsockopt(p.client, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 && ti.tcpi_state == TCP_CLOSE;
    }
    ASSERT_TRUE(receiver->join());
    ASSERT_TRUE(ahead->join());
    if (!closed) GTEST_SKIP() << "this kernel kept the connection 1.5 s (it gives up on a shut window later)";
    // This call or, if the limit's timer stopped it first, the next one reports the kernel's error.
    EXPECT_TRUE(e1 == ETIMEDOUT || (e1 == EAGAIN && r2 == -1 && e2 == ETIMEDOUT))
        << "first " << strerror(e1) << ", then " << r2 << " (" << strerror(e2) << ")";
}

// A blocking connect to a listener whose accept queue is full: the listener drops its SYNs, and
// the kernel gives up after TCP_USER_TIMEOUT or TCP_SYNCNT retries.
TEST_P(posix_test, connect_reports_the_kernels_etimedout) {
    using clk = std::chrono::steady_clock;
    tcp_pair p;
    ASSERT_EQ(posix::listen(p.listener, 0), 0);  // a queue of one, which `filler` takes
    int filler = posix::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_EQ(posix::connect(filler, reinterpret_cast<sockaddr*>(&p.addr), sizeof p.addr), 0) << strerror(errno);
    int c = posix::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int syn_retries = 1;
    ASSERT_EQ(setsockopt(c, IPPROTO_TCP, TCP_USER_TIMEOUT, &k_user_timeout_ms, sizeof k_user_timeout_ms), 0);
    ASSERT_EQ(setsockopt(c, IPPROTO_TCP, TCP_SYNCNT, &syn_retries, sizeof syn_retries), 0);
    ASSERT_EQ(posix::setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &k_limit, sizeof k_limit), 0);
    const auto t0 = clk::now();
    errno = 0;
    const int r = posix::connect(c, reinterpret_cast<sockaddr*>(&p.addr), sizeof p.addr);
    const int e = errno;
    const auto waited = clk::now() - t0;
    posix::close(c);
    posix::close(filler);
    ASSERT_EQ(r, -1) << "connected past a full accept queue";
    if (e == EINPROGRESS && waited >= k_ran_out) GTEST_SKIP() << "this kernel kept sending SYNs past the limit";
    EXPECT_EQ(e, ETIMEDOUT) << strerror(e);
}

// A blocking connect to a Unix listener whose backlog is full waits as the kernel's does, using
// next to no CPU, until SO_SNDTIMEO runs out, and then fails with the kernel's answer for a Unix
// socket, EAGAIN (a non-blocking one gets it at once). The limit's timer cancelled the connect,
// which made it EINPROGRESS, a TCP connect's answer.
TEST_P(posix_test, a_blocking_connect_to_a_full_unix_backlog_waits_out_sndtimeo) {
    test::full_unix_listener l;
    ASSERT_TRUE(l.full);
    const int nb = posix::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    errno = 0;
    EXPECT_EQ(posix::connect(nb, l.sa(), l.len), -1);
    EXPECT_EQ(errno, EAGAIN) << strerror(errno);
    posix::close(nb);
    const int c = posix::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const timeval limit{0, 200'000};
    ASSERT_EQ(posix::setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit), 0);
    const test::sleeping_wait w;
    errno = 0;
    const int r = posix::connect(c, l.sa(), l.len);
    const int e = errno;
    w.expect(190ms, 2s);
    posix::close(c);
    ASSERT_EQ(r, -1) << "connected past a full backlog";
    EXPECT_EQ(e, EAGAIN) << strerror(e);
}

TEST_P(posix_test, nonblocking_sockets_keep_eagain) {
    tcp_pair p;
    char b[4];
    EXPECT_EQ(posix::recv(p.server, b, sizeof b, MSG_DONTWAIT), -1);
    EXPECT_EQ(errno, EAGAIN);
    int fl = posix::fcntl(p.server, F_GETFL);
    ASSERT_GE(fl, 0);
    EXPECT_FALSE(fl & O_NONBLOCK);  // whatever the engine did to the kernel's flag
    ASSERT_EQ(posix::fcntl(p.server, F_SETFL, fl | O_NONBLOCK), 0);
    EXPECT_TRUE(posix::fcntl(p.server, F_GETFL) & O_NONBLOCK);
    EXPECT_EQ(posix::read(p.server, b, sizeof b), -1);
    EXPECT_EQ(errno, EAGAIN);
    // Cleared again: the program's view follows, and on io_uring (which needs no O_NONBLOCK of
    // its own) so does the kernel's, which a child sharing the open file would see.
    ASSERT_EQ(posix::fcntl(p.server, F_SETFL, fl), 0);
    EXPECT_FALSE(posix::fcntl(p.server, F_GETFL) & O_NONBLOCK);
    if (current_engine()->type() == engine::kind::io_uring) {
        EXPECT_FALSE(::fcntl(p.server, F_GETFL) & O_NONBLOCK);
    }
    ASSERT_EQ(posix::fcntl(p.server, F_SETFL, fl | O_NONBLOCK), 0);
    int nb = posix::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    errno = 0;
    EXPECT_EQ(posix::connect(nb, reinterpret_cast<sockaddr*>(&p.addr), sizeof p.addr), -1);
    EXPECT_EQ(errno, EINPROGRESS);
    EXPECT_GE(posix::accept4(p.listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC), 0);
    posix::close(nb);
}

// ioctl(FIONBIO) is O_NONBLOCK as fcntl sets it (OpenSSL's BIO_socket_nbio uses it): a receive
// with nothing to read fails with EAGAIN, not parked; cleared again, it waits for the data (on
// epoll the kernel's flag stays set, or the receive would block the vCPU and its writer).
TEST_P(posix_test, fionbio_sets_and_clears_nonblocking) {
    tcp_pair p;
    char b[4];
    int on = 1;
    ASSERT_EQ(posix::ioctl(p.server, FIONBIO, &on), 0);
    EXPECT_TRUE(posix::fcntl(p.server, F_GETFL) & O_NONBLOCK);
    errno = 0;
    EXPECT_EQ(posix::recv(p.server, b, sizeof b, 0), -1);
    EXPECT_EQ(errno, EAGAIN);
    on = 0;
    ASSERT_EQ(posix::ioctl(p.server, FIONBIO, &on), 0);
    EXPECT_FALSE(posix::fcntl(p.server, F_GETFL) & O_NONBLOCK);
    auto writer = spawn([&] { EXPECT_EQ(posix::write(p.client, "z", 1), 1); });
    EXPECT_EQ(posix::recv(p.server, b, 1, 0), 1);
    EXPECT_EQ(b[0], 'z');
    ASSERT_TRUE(writer->join());
    errno = 0;
    EXPECT_EQ(posix::ioctl(k_closed_fd, FIONBIO, &on), -1);
    EXPECT_EQ(errno, EBADF);
}

// A number closed without close() (posix::closing before another close, close_range) starts
// afresh: the blocking pipe that gets it next is not taken for the non-blocking socket it named,
// whose read would have been a blocking system call on the vCPU (the writer never ran).
TEST_P(posix_test, a_number_closed_another_way_forgets_its_state) {
    for (int way : {0, 1}) {
        SCOPED_TRACE(way ? "close_range" : "closing");
        int p[2];
        ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);  // (first: it must not take the number freed below)
        const int s = posix::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        ASSERT_GE(s, 0);
        ASSERT_TRUE(posix::fcntl(s, F_GETFL) & O_NONBLOCK);
        if (way == 0) {
            posix::closing(s);
            ASSERT_EQ(::close(s), 0);
        } else {
            ASSERT_EQ(posix::close_range(s, s, 0), 0);
        }
        ASSERT_EQ(::dup3(p[0], s, O_CLOEXEC), s);  // s names a blocking pipe, made behind the facade
        ::close(p[0]);
        ASSERT_FALSE(posix::fcntl(s, F_GETFL) & O_NONBLOCK);  // (a read would block the vCPU)
        auto writer = spawn([&] { EXPECT_EQ(posix::write(p[1], "w", 1), 1); });
        char c = 0;
        EXPECT_EQ(posix::read(s, &c, 1), 1);  // parked until the writer ran
        EXPECT_EQ(c, 'w');
        ASSERT_TRUE(writer->join());
        posix::close(s);
        posix::close(p[1]);
    }
    // CLOSE_RANGE_CLOEXEC closes nothing: the number keeps its state.
    const int s = posix::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    ASSERT_EQ(posix::close_range(s, s, CLOSE_RANGE_CLOEXEC), 0);
    EXPECT_TRUE(::fcntl(s, F_GETFD) & FD_CLOEXEC);
    EXPECT_TRUE(posix::fcntl(s, F_GETFL) & O_NONBLOCK);
    posix::close(s);
}

TEST_P(posix_test, poll_select_and_epoll_wait_park_until_ready) {
    tcp_pair a, b;
    pollfd fds[2] = {{a.server, POLLIN, 0}, {b.server, POLLIN, 0}};
    EXPECT_EQ(posix::poll(fds, 2, 10), 0);  // times out, nothing ready
    auto writer = spawn([&] { EXPECT_EQ(posix::write(b.client, "x", 1), 1); });
    EXPECT_EQ(posix::poll(fds, 2, -1), 1);
    EXPECT_EQ(fds[0].revents, 0);
    EXPECT_TRUE(fds[1].revents & POLLIN);
    ASSERT_TRUE(writer->join());

    fd_set rd;
    FD_ZERO(&rd);
    FD_SET(a.server, &rd);
    FD_SET(b.server, &rd);
    EXPECT_EQ(posix::select(std::max(a.server, b.server) + 1, &rd, nullptr, nullptr, nullptr), 1);
    EXPECT_TRUE(FD_ISSET(b.server, &rd));
    EXPECT_FALSE(FD_ISSET(a.server, &rd));

    int ep = epoll_create1(EPOLL_CLOEXEC);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = a.server;
    ASSERT_EQ(epoll_ctl(ep, EPOLL_CTL_ADD, a.server, &ev), 0);
    epoll_event out[4];
    EXPECT_EQ(posix::epoll_wait(ep, out, 4, 10), 0);
    auto writer2 = spawn([&] { EXPECT_EQ(posix::write(a.client, "y", 1), 1); });
    ASSERT_EQ(posix::epoll_wait(ep, out, 4, -1), 1);
    EXPECT_EQ(out[0].data.fd, a.server);
    ASSERT_TRUE(writer2->join());
    posix::close(ep);
}

// A poll of one fd that another fiber closes while it waits reports POLLNVAL, as Linux's poll
// does for a closed fd; the engine's EBADF (close fails the fd's waiters) failed the call.
TEST_P(posix_test, poll_of_an_fd_closed_meanwhile_reports_pollnval) {
    int p[2];
    ASSERT_EQ(pipe2(p, O_CLOEXEC), 0);
    int r = 0;
    short re = 0;
    auto poller = spawn([&] {
        pollfd x{p[0], POLLIN, 0};
        r = posix::poll(&x, 1, 5000);
        re = x.revents;
    });
    this_fiber::yield();  // the poller is parked now
    ASSERT_EQ(posix::close(p[0]), 0);
    ASSERT_TRUE(poller->join());
    EXPECT_EQ(r, 1) << strerror(errno);
    EXPECT_EQ(re, POLLNVAL);
    posix::close(p[1]);
}

// poll's other input and output events (POLLRDNORM, POLLWRNORM, the band ones) wake it as
// POLLIN does: alone on a pipe (no POLLOUT ever comes to make the epoll engine look again) and
// with a second entry (the epoll set that waits for several), both parked to the timeout.
TEST_P(posix_test, poll_wakes_for_rdnorm_and_wrnorm) {
    for (nfds_t n : {nfds_t{1}, nfds_t{2}}) {
        SCOPED_TRACE(n);
        int a[2], b[2];
        ASSERT_EQ(pipe2(a, O_CLOEXEC), 0);
        ASSERT_EQ(pipe2(b, O_CLOEXEC), 0);
        auto writer = spawn([&] { EXPECT_EQ(posix::write(a[1], "x", 1), 1); });
        pollfd in[2] = {{a[0], POLLRDNORM, 0}, {b[0], POLLRDNORM, 0}};
        // Woken by the write, not at the timeout.
        int64_t t0 = mono_now_ns();
        EXPECT_EQ(posix::poll(in, n, 5000), 1);
        EXPECT_LT(mono_now_ns() - t0, 4'000'000'000);
        EXPECT_TRUE(in[0].revents & POLLRDNORM);
        ASSERT_TRUE(writer->join());
        char x;
        ASSERT_EQ(posix::read(a[0], &x, 1), 1);
        // A full pipe, one page of it read by another fiber: writable again.
        const int fl = posix::fcntl(a[1], F_GETFL);
        ASSERT_EQ(posix::fcntl(a[1], F_SETFL, fl | O_NONBLOCK), 0);
        char page[4096] = {};
        while (posix::write(a[1], page, sizeof page) > 0) {
        }
        ASSERT_EQ(errno, EAGAIN);
        auto drainer = spawn([&] { EXPECT_EQ(posix::read(a[0], page, sizeof page), static_cast<ssize_t>(sizeof page)); });
        pollfd out[2] = {{a[1], POLLWRNORM, 0}, {b[0], POLLRDNORM, 0}};
        t0 = mono_now_ns();
        EXPECT_EQ(posix::poll(out, n, 5000), 1);
        EXPECT_LT(mono_now_ns() - t0, 4'000'000'000);
        EXPECT_TRUE(out[0].revents & POLLWRNORM);
        ASSERT_TRUE(drainer->join());
        for (int fd : {a[0], a[1], b[0], b[1]}) posix::close(fd);
    }
}

// select on many fds from a fiber with the smallest stack the preload gives a thread (16 KiB),
// half of it used by the caller's own buffer: select's poll array must not live on that stack.
TEST_P(posix_test, select_on_many_fds_fits_a_small_fiber_stack) {
#if defined(__SANITIZE_ADDRESS__)
    GTEST_SKIP() << "ASan's redzones change what fits a 16 KiB stack";
#endif
    std::vector<std::array<int, 2>> pairs(40);
    for (auto& p : pairs) ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, p.data()), 0);
    ASSERT_EQ(write(pairs[33][1], "x", 1), 1);
    int count = -1;
    bool only_that_one = false;
    auto f = spawn(fiber_options{.stack_size = 16 * 1024}, [&] {
        volatile char buffer[8 * 1024];
        buffer[0] = 1;
        buffer[sizeof buffer - 1] = 1;
        fd_set rd;
        FD_ZERO(&rd);
        int top = 0;
        for (auto& p : pairs) FD_SET(p[0], &rd), top = std::max(top, p[0]);
        count = posix::select(top + 1, &rd, nullptr, nullptr, nullptr);
        only_that_one = FD_ISSET(pairs[33][0], &rd) && !FD_ISSET(pairs[32][0], &rd);
    });
    ASSERT_TRUE(f);
    ASSERT_TRUE(f->join());
    EXPECT_EQ(count, 1);
    EXPECT_TRUE(only_that_one);
    for (auto& p : pairs) close(p[0]), close(p[1]);
}

// An nfds beyond FD_SETSIZE is cut to the fd table, as Linux does, not refused with EINVAL: a
// program passing getdtablesize() (RLIMIT_NOFILE), or sets larger than fd_set holding fds beyond
// FD_SETSIZE, selects as without gluon.
TEST_P(posix_test, select_takes_nfds_beyond_fd_setsize) {
    int ready[2], idle[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ready), 0);
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, idle), 0);
    ASSERT_EQ(posix::write(ready[1], "x", 1), 1);
    fd_set two[2];  // (room for twice FD_SETSIZE bits: what a table that size reads)
    std::memset(two, 0, sizeof two);
    FD_SET(ready[0], &two[0]);
    FD_SET(idle[0], &two[0]);
    timeval zero{};
    errno = 0;
    EXPECT_EQ(posix::select(2 * FD_SETSIZE, two, nullptr, nullptr, &zero), 1) << strerror(errno);
    EXPECT_TRUE(FD_ISSET(ready[0], &two[0]));
    EXPECT_FALSE(FD_ISSET(idle[0], &two[0]));
    // A set of its own size for fds above FD_SETSIZE (the soft limit raised for them, if the
    // hard one allows).
    const int above = FD_SETSIZE + 64;
    rlimit saved{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
    rlimit raised = saved;
    if (raised.rlim_cur != RLIM_INFINITY && raised.rlim_cur < rlim_t{above} + 2) raised.rlim_cur = rlim_t{above} + 2;
    if (raised.rlim_max != RLIM_INFINITY && raised.rlim_max < raised.rlim_cur) GTEST_SKIP() << "RLIMIT_NOFILE keeps fds low";
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &raised), 0);
    auto move_above = [&](int fd) {
        const int h = fcntl(fd, F_DUPFD_CLOEXEC, above);
        close(fd);
        return h;
    };
    const int hr = move_above(ready[0]), hi = move_above(idle[0]);
    ASSERT_GE(hr, above);
    ASSERT_GE(hi, above);
    const int nfds = std::max(hr, hi) + 1;
    std::vector<__fd_mask> bits((nfds + NFDBITS - 1) / NFDBITS, 0);
    auto bit = [&](int fd) -> __fd_mask& { return bits[static_cast<size_t>(fd / NFDBITS)]; };
    auto mask = [](int fd) { return __fd_mask{1} << (fd % NFDBITS); };
    bit(hr) |= mask(hr);
    bit(hi) |= mask(hi);
    auto* set = reinterpret_cast<fd_set*>(bits.data());
    EXPECT_EQ(posix::select(nfds, set, nullptr, nullptr, nullptr), 1) << strerror(errno);
    EXPECT_TRUE(bit(hr) & mask(hr));
    EXPECT_FALSE(bit(hi) & mask(hi));
    for (int fd : {hr, hi, ready[1], idle[1]}) posix::close(fd);
    setrlimit(RLIMIT_NOFILE, &saved);
}

// errno is the caller's own even when another fiber failed differently while it was parked.
TEST_P(posix_test, errno_is_set_right_before_returning) {
    timespec rem{};
    int seen = 0;
    auto sleeper = spawn([&] {
        timespec t{30, 0};
        EXPECT_EQ(posix::nanosleep(&t, &rem), -1);
        seen = errno;
    });
    this_fiber::yield();
    EXPECT_EQ(posix::close(-1), -1);  // EBADF on this thread, while the sleeper is parked
    ASSERT_TRUE(sleeper->interrupt());
    ASSERT_TRUE(sleeper->join());
    EXPECT_EQ(seen, EINTR);
    EXPECT_GT(rem.tv_sec, 20);
    EXPECT_EQ(posix::usleep(1000), 0);
    EXPECT_EQ(posix::sleep(0), 0u);
    timespec bad{0, 2'000'000'000L};
    EXPECT_EQ(posix::nanosleep(&bad, nullptr), -1);
    EXPECT_EQ(errno, EINVAL);
}

TEST_P(posix_test, files_sendfile_and_fsync) {
    char path[] = "/tmp/gluon-posix-XXXXXX";
    int f = mkstemp(path);
    ASSERT_GE(f, 0);
    unlink(path);
    std::string data(100000, '\0');
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
    ASSERT_EQ(posix::pwrite(f, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
    EXPECT_EQ(posix::fsync(f), 0);
    EXPECT_EQ(posix::fdatasync(f), 0);
    char b[10];
    EXPECT_EQ(posix::pread(f, b, sizeof b, 5), 10);
    EXPECT_EQ(std::memcmp(b, data.data() + 5, 10), 0);
    iovec v{b, sizeof b};
    EXPECT_EQ(posix::preadv(f, &v, 1, 7), 10);
    EXPECT_EQ(std::memcmp(b, data.data() + 7, 10), 0);
    EXPECT_EQ(posix::pwritev(f, &v, 1, 0), 10);
    EXPECT_EQ(posix::pwrite(f, data.data(), 10, 0), 10);

    tcp_pair p;
    ASSERT_EQ(lseek(f, 0, SEEK_SET), 0);
    std::string got(data.size(), '\0');
    auto reader = spawn([&] {
        size_t n = 0;
        while (n < got.size()) {
            ssize_t r = posix::read(p.client, got.data() + n, got.size() - n);
            ASSERT_GT(r, 0);
            n += static_cast<size_t>(r);
        }
    });
    size_t sent = 0;
    while (sent < data.size()) {
        ssize_t r = posix::sendfile(p.server, f, nullptr, data.size() - sent);  // the file position advances
        ASSERT_GT(r, 0) << strerror(errno);
        sent += static_cast<size_t>(r);
    }
    EXPECT_EQ(lseek(f, 0, SEEK_CUR), static_cast<off_t>(data.size()));
    ASSERT_TRUE(reader->join());
    EXPECT_EQ(got, data);
    off_t off = 10;
    EXPECT_EQ(posix::sendfile(p.server, f, &off, 5), 5);
    EXPECT_EQ(off, 15);
    posix::close(f);
}

TEST_P(posix_test, getaddrinfo_is_offloaded) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    ASSERT_EQ(posix::getaddrinfo("localhost", "80", &hints, &res), 0);
    ASSERT_NE(res, nullptr);
    EXPECT_EQ(reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_port, htons(80));
    freeaddrinfo(res);
    hints.ai_flags = AI_NUMERICHOST;
    EXPECT_EQ(posix::getaddrinfo("not-a-number", "80", &hints, &res), EAI_NONAME);
}

// A peer that has gone: the send calls fail with EPIPE and no signal (MSG_NOSIGNAL is added);
// write and writev raise SIGPIPE as POSIX says (held pending here, SIGPIPE blocked).
TEST_P(posix_test, only_write_and_writev_raise_sigpipe) {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    ASSERT_EQ(posix::close(sv[1]), 0);
    sigset_t pipe_only, old;
    sigemptyset(&pipe_only);
    sigaddset(&pipe_only, SIGPIPE);
    ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &pipe_only, &old), 0);
    auto sigpipe_pending = [&] {
        sigset_t pending;
        sigpending(&pending);
        if (!sigismember(&pending, SIGPIPE)) return false;
        const timespec zero{};
        return sigtimedwait(&pipe_only, nullptr, &zero) == SIGPIPE;  // consumes it
    };
    ASSERT_FALSE(sigpipe_pending());
    msghdr m{};
    iovec v{const_cast<char*>("x"), 1};
    m.msg_iov = &v;
    m.msg_iovlen = 1;
    EXPECT_EQ(posix::send(sv[0], "x", 1, 0), -1);
    EXPECT_EQ(errno, EPIPE);
    EXPECT_EQ(posix::sendmsg(sv[0], &m, 0), -1);
    EXPECT_EQ(errno, EPIPE);
    EXPECT_FALSE(sigpipe_pending()) << "a send call raised SIGPIPE";
    EXPECT_EQ(posix::writev(sv[0], &v, 1), -1);
    EXPECT_EQ(errno, EPIPE);
    EXPECT_TRUE(sigpipe_pending()) << "writev did not raise SIGPIPE";
    EXPECT_EQ(posix::write(sv[0], "x", 1), -1);
    EXPECT_EQ(errno, EPIPE);
    EXPECT_TRUE(sigpipe_pending()) << "write did not raise SIGPIPE";
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
    EXPECT_EQ(posix::close(sv[0]), 0);
}

// Outside a vCPU every call is the plain system call, blocking the thread as libc's would.
TEST(posix_thread, plain_threads_block_as_libc) {
    int sv[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    ASSERT_EQ(posix::write(sv[0], "hi", 2), 2);
    char b[2];
    ASSERT_EQ(posix::read(sv[1], b, 2), 2);
    pollfd pf{sv[1], POLLIN, 0};
    EXPECT_EQ(posix::poll(&pf, 1, 0), 0);
    EXPECT_EQ(posix::read(-1, b, 1), -1);
    EXPECT_EQ(errno, EBADF);
    EXPECT_EQ(posix::close(sv[0]), 0);
    EXPECT_EQ(posix::read(sv[1], b, 2), 0);
    EXPECT_EQ(posix::close(sv[1]), 0);
}

// Off a vCPU a signal handler's run ends nanosleep and sleep, as libc's (SA_RESTART does not
// restart them): a main thread sleeping until SIGTERM's handler sets a flag must wake. They
// slept their whole time out, through every signal.
TEST(posix_thread, a_signal_handler_interrupts_the_sleeps) {
    struct sigaction sa {}, old {};
    sa.sa_handler = [](int) {};
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ASSERT_EQ(sigaction(SIGUSR1, &sa, &old), 0);
    const pthread_t sleeper = pthread_self();
    std::atomic<bool> woke{false};
    // The signal may come before the call sleeps (its handler runs, the sleep begins): sent
    // again until the sleeper is back.
    std::thread kicker([&] {
        while (!woke.load()) {
            pthread_kill(sleeper, SIGUSR1);
            std::this_thread::sleep_for(5ms);
        }
    });
    timespec req{30, 0}, rem{};
    errno = 0;
    const int r = posix::nanosleep(&req, &rem);
    const int e = errno;
    const unsigned left = posix::sleep(30);
    woke = true;
    kicker.join();
    sigaction(SIGUSR1, &old, nullptr);
    EXPECT_EQ(r, -1);
    EXPECT_EQ(e, EINTR);
    EXPECT_GT(rem.tv_sec, 20);  // the time left
    EXPECT_GT(left, 20u);
}

}  // namespace
}  // namespace gluon
