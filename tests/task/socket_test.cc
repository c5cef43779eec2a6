// co::accept and co::connect on every engine, over loopback TCP: a connection made by one task
// and accepted by another carries bytes both ways with the peer's address reported; a refused
// connect, an accept that times out and a cancelled accept end with their errors; a connect to
// a Unix listener whose backlog is full waits for room.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "gluon/runtime/fiber.h"
#include "gluon/task/io.h"
#include "gluon/task/spawn.h"
#include "test_support.h"

namespace gluon {
namespace {

using namespace std::chrono_literals;

class task_socket_test : public test::engine_test {};

int tcp_socket() { return ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0); }

// The listener is non-blocking: the epoll engine tries an accept before it waits.
struct listener : test::loopback_listener {
    listener() : loopback_listener(16, SOCK_NONBLOCK | SOCK_CLOEXEC) {}
};

TEST_P(task_socket_test, a_task_connects_another_accepts_and_they_talk) {
    listener l;
    auto server = [](int lfd) -> task<std::string> {
        sockaddr_in peer{};
        socklen_t len = sizeof peer;
        auto fd = co_await co::accept(lfd, reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (!fd) co_return "accept: " + fd.error().message();
        EXPECT_EQ(peer.sin_family, AF_INET);
        EXPECT_EQ(peer.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
        char buf[4];
        auto got = co_await co::recv_exactly(*fd, buf, 4);
        if (got) got = co_await co::send_all(*fd, "pong", 4);
        ::close(*fd);
        co_return got ? std::string(buf, 4) : "recv/send: " + got.error().message();
    };
    auto client = [](const sockaddr* to) -> task<std::string> {
        int fd = tcp_socket();
        auto c = co_await co::connect(fd, to, sizeof(sockaddr_in));
        if (!c) {
            ::close(fd);
            co_return "connect: " + c.error().message();
        }
        char buf[4];
        auto got = co_await co::send_all(fd, "ping", 4);
        if (got) got = co_await co::recv_exactly(fd, buf, 4);
        ::close(fd);
        co_return got ? std::string(buf, 4) : "send/recv: " + got.error().message();
    };
    auto both = [&]() -> task<void> {
        auto s = std::move(co_spawn(server(l.fd)).value());
        auto c = std::move(co_spawn(client(l.sa())).value());
        EXPECT_EQ(co_await c, "pong");
        EXPECT_EQ(co_await s, "ping");
    };
    ASSERT_TRUE(block_on(both()));
}

TEST_P(task_socket_test, a_connect_to_a_closed_port_is_refused) {
    sockaddr_in closed{};
    {
        listener l;  // a port that was just free, closed again
        closed = l.addr;
    }
    auto t = [](sockaddr_in to) -> task<int> {
        int fd = tcp_socket();
        auto c = co_await co::connect(fd, reinterpret_cast<const sockaddr*>(&to), sizeof to);
        ::close(fd);
        co_return c ? 0 : c.error().value();
    };
    EXPECT_EQ(block_on(t(closed)).value(), ECONNREFUSED);
}

TEST_P(task_socket_test, an_accept_with_no_client_times_out_and_a_cancelled_one_ends) {
    listener l;
    auto timed = [](int lfd) -> task<int> {
        auto fd = co_await co::accept(lfd, nullptr, nullptr, SOCK_CLOEXEC, 20ms);
        co_return fd ? 0 : fd.error().value();
    };
    EXPECT_EQ(block_on(timed(l.fd)).value(), ETIMEDOUT);
    auto forever = [](int lfd) -> task<int> {
        auto fd = co_await co::accept(lfd);
        co_return fd ? 0 : fd.error().value();
    };
    auto t = [&]() -> task<int> {
        auto h = std::move(co_spawn(forever(l.fd)).value());
        co_await co::nop();  // the accept is waiting in the engine
        h.cancel();
        co_return co_await h;
    };
    EXPECT_EQ(block_on(t()).value(), ECANCELED);
}

// recv_exactly's timeout bounds the whole call, as fd::recv_exactly's: a peer that sends a
// byte every 20 ms (each receive gets its byte well within the timeout) takes 400 ms to send
// 20, and a call with 150 ms fails with ETIMEDOUT.
TEST_P(task_socket_test, recv_exactly_times_out_on_a_peer_that_trickles) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    auto peer = spawn([&] {
        for (int i = 0; i < 20; ++i) {
            if (!this_fiber::sleep_for(20ms)) return;
            ASSERT_EQ(::send(sv[1], "x", 1, MSG_NOSIGNAL), 1);
        }
    });
    ASSERT_TRUE(peer);
    auto t = [](int fd) -> task<int> {
        char buf[20];
        auto r = co_await co::recv_exactly(fd, buf, sizeof buf, 150ms);
        co_return r ? 0 : r.error().value();
    };
    EXPECT_EQ(block_on(t(sv[0])).value(), ETIMEDOUT);
    (void)peer->interrupt();  // still sending
    ASSERT_TRUE(peer->join());
    ::close(sv[0]);
    ::close(sv[1]);
}

// send_all's timeout bounds the whole call too: a peer that takes what has arrived every 20 ms
// wakes each send well within the timeout, but 2 MiB through a send buffer of a few tens of
// KiB takes it over a second, and a call with 150 ms fails with ETIMEDOUT (it sent it all).
TEST_P(task_socket_test, send_all_times_out_on_a_peer_that_reads_slowly) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    const int sndbuf = 16 * 1024;
    ASSERT_EQ(::setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf), 0);
    constexpr size_t total = size_t{2} << 20;
    size_t taken = 0;
    auto peer = spawn([&] {
        std::vector<char> buf(64 * 1024);
        for (;;) {
            if (!this_fiber::sleep_for(20ms)) return;
            ssize_t r;
            while ((r = ::recv(sv[1], buf.data(), buf.size(), MSG_DONTWAIT)) > 0)
                taken += static_cast<size_t>(r);
            if (r == 0) return;  // the sender is done
        }
    });
    ASSERT_TRUE(peer);
    auto t = [](int fd) -> task<int> {
        std::vector<char> data(total, 'x');
        auto r = co_await co::send_all(fd, data.data(), data.size(), 150ms);
        co_return r ? 0 : r.error().value();
    };
    EXPECT_EQ(block_on(t(sv[0])).value(), ETIMEDOUT);
    EXPECT_LT(taken, total);
    ASSERT_EQ(::shutdown(sv[0], SHUT_WR), 0);
    ASSERT_TRUE(peer->join());
    ::close(sv[0]);
    ::close(sv[1]);
}

// co::connect to a Unix listener whose backlog is full waits as fd::connect does: attempts
// after pauses that grow, next to no CPU, ETIMEDOUT at the timeout. Its EAGAIN ended it at once.
TEST_P(task_socket_test, a_connect_to_a_full_unix_backlog_pauses_between_attempts_until_its_timeout) {
    test::full_unix_listener l;
    ASSERT_TRUE(l.full);
    auto t = [](int fd, const sockaddr* to, socklen_t len) -> task<int> {
        auto c = co_await co::connect(fd, to, len, 300ms);
        co_return c ? 0 : c.error().value();
    };
    for (const int nonblock : {int{SOCK_NONBLOCK}, 0}) {
        const int c = ::socket(AF_UNIX, SOCK_STREAM | nonblock | SOCK_CLOEXEC, 0);
        ASSERT_GE(c, 0);
        const test::sleeping_wait w;
        EXPECT_EQ(block_on(t(c, l.sa(), l.len)).value(), ETIMEDOUT);
        w.expect(290ms, 1300ms);
        ASSERT_TRUE(fd::close(c));
    }
}

// The connect, refused while the backlog is full, gets in at its next attempt once the
// listener has taken a connection (after a while: its result does not depend on how long).
TEST_P(task_socket_test, a_connect_to_a_full_unix_backlog_gets_in_once_the_listener_accepts) {
    test::full_unix_listener l;
    ASSERT_TRUE(l.full);
    const int c = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ASSERT_GE(c, 0);
    bool done = false;
    auto t = [](int fd, const sockaddr* to, socklen_t len, bool& ended) -> task<result<void>> {
        auto r = co_await co::connect(fd, to, len, 10s);
        ended = true;
        co_return r;
    };
    auto h = co_spawn(t(c, l.sa(), l.len, done));
    ASSERT_TRUE(h);
    ASSERT_TRUE(this_fiber::sleep_for(50ms));
    EXPECT_FALSE(done) << "the connect ended while the backlog was full";
    l.accept_one();
    const int64_t t0 = mono_now_ns();
    auto r = h->join();
    EXPECT_TRUE(r) << r.error().message();
    // Its next attempt, at most k_connect_pause_max after the room came.
    EXPECT_LT(mono_now_ns() - t0, 1'000'000'000);
    ASSERT_TRUE(fd::close(c));
}

GLUON_ENGINE_TEST_SUITE(task_socket_test);

}  // namespace
}  // namespace gluon
