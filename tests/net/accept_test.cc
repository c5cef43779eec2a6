// Accepting on every engine: connections that arrive while nobody accepts, a listener closed
// with connections queued, and accepts that time out. On io_uring a listener's accepts share one
// multishot accept; these tests pin down that nothing is lost, reordered or held open by it.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "gluon/net/server.h"
#include "gluon/net/socket.h"
#include "gluon/runtime/fd.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/runtime.h"
#include "test_support.h"

namespace gluon::net {
namespace {

using namespace std::chrono_literals;

class accept_test : public test::engine_test {};
GLUON_ENGINE_TEST_SUITE(accept_test);

// Each client sends its index once connected.
stream connect_numbered(const address& a, uint32_t i) {
    auto c = stream::connect(a, 5s);
    EXPECT_TRUE(c) << c.error().message();
    EXPECT_TRUE(c->write_all(&i, sizeof i, 5s));
    return std::move(*c);
}

uint32_t read_number(stream& s) {
    uint32_t v = UINT32_MAX;
    auto r = s.read_exactly(&v, sizeof v, 5s);
    EXPECT_TRUE(r) << r.error().message();
    return v;
}

// More connections than the multishot accept queues arrive while no accept waits (it is
// cancelled at 64 and armed again): every one is accepted, in the order they connected.
TEST_P(accept_test, connections_that_arrive_while_nobody_accepts_are_all_accepted_in_order) {
    auto l = listener::listen(address::ipv4_loopback(0));
    ASSERT_TRUE(l) << l.error().message();
    auto where = l->local_address();
    ASSERT_TRUE(where);
    constexpr uint32_t n = 150;
    std::vector<stream> clients;
    clients.push_back(connect_numbered(*where, 0));
    auto first = l->accept(5s);
    ASSERT_TRUE(first) << first.error().message();
    EXPECT_EQ(read_number(*first), 0u);
    for (uint32_t i = 1; i < n; ++i) {
        clients.push_back(connect_numbered(*where, i));
        if (i % 10 == 0) (void)this_fiber::sleep_for(1ms);  // let the engine run its completions
    }
    for (uint32_t i = 1; i < n; ++i) {
        auto s = l->accept(5s);
        ASSERT_TRUE(s) << i << ": " << s.error().message();
        EXPECT_EQ(read_number(*s), i);
    }
    auto none = l->accept(20ms);
    ASSERT_FALSE(none);
    EXPECT_EQ(none.error(), std::errc::timed_out);
}

// Closing a listener releases its port at once (an armed accept holds the socket open) and
// the connections it had accepted for nobody are closed, not leaked.
TEST_P(accept_test, closing_a_listener_releases_its_port_and_its_queued_connections) {
    auto l = listener::listen(address::ipv4_loopback(0));
    ASSERT_TRUE(l) << l.error().message();
    auto where = l->local_address();
    ASSERT_TRUE(where);
    auto c1 = connect_numbered(*where, 1);
    auto s1 = l->accept(5s);
    ASSERT_TRUE(s1);
    EXPECT_EQ(read_number(*s1), 1u);
    auto c2 = connect_numbered(*where, 2);
    (void)this_fiber::sleep_for(1ms);  // the engine may accept it meanwhile: either way it must close
    ASSERT_TRUE(l->close());
    auto again = listener::listen(*where);
    ASSERT_TRUE(again) << again.error().message();
    char b;
    auto r = c2.read_some(&b, 1, 5s);  // closed by the server: end of stream or a reset
    EXPECT_TRUE((r && *r == 0) || (!r && r.error() == std::errc::connection_reset)) << (r ? "data" : r.error().message());
    // The new listener works.
    auto c3 = connect_numbered(*where, 3);
    auto s3 = again->accept(5s);
    ASSERT_TRUE(s3);
    EXPECT_EQ(read_number(*s3), 3u);
}

// A program that waits for the listener's readability before it accepts still sees connections
// the engine has taken from the kernel for the listener's next accept.
TEST_P(accept_test, a_readiness_poll_reports_connections_taken_for_the_next_accept) {
    auto l = listener::listen(address::ipv4_loopback(0));
    ASSERT_TRUE(l);
    auto where = l->local_address();
    ASSERT_TRUE(where);
    auto c1 = connect_numbered(*where, 1);
    auto s1 = l->accept(5s);
    ASSERT_TRUE(s1);
    for (uint32_t i = 2; i < 5; ++i) {
        auto c = connect_numbered(*where, i);
        (void)this_fiber::sleep_for(2ms);  // the engine may take it meanwhile: either way it is reported
        auto r = fd::poll(l->get(), POLLIN, 1s);
        ASSERT_TRUE(r) << i << ": " << r.error().message();
        EXPECT_TRUE(*r & POLLIN);
        auto s = l->accept(5s);
        ASSERT_TRUE(s);
        EXPECT_EQ(read_number(*s), i);
    }
}

// A server stopped from another vCPU frees its port: stopping interrupts the accepting fiber,
// and its vCPU's engine then cancels the armed accept that held the listening socket (the
// closing vCPU's engine cannot reach it).
TEST_P(accept_test, a_server_stopped_from_another_vcpu_frees_its_port) {
    auto rt = runtime::start(test::test_runtime(2, GetParam()));
    ASSERT_TRUE(rt) << rt.error().message();
    std::unique_ptr<server> srv;
    std::atomic<int> served{0};
    ASSERT_TRUE((*rt)->run(0, [&] {
        auto s = server::start(address::ipv4_loopback(0), [&](byte_stream& c) {
            uint32_t v = 0;
            if (c.read_exactly(&v, sizeof v, 5s)) ++served;
        });
        ASSERT_TRUE(s) << s.error().message();
        srv = std::move(*s);
    }));
    ASSERT_TRUE(srv);
    const address where = srv->local_address();
    auto c = connect_numbered(where, 1);
    for (int i = 0; i < 5000 && served == 0; ++i) (void)this_fiber::sleep_for(1ms);
    ASSERT_EQ(served, 1);
    ASSERT_TRUE((*rt)->run(1, [&] { srv->stop(1s); }));
    auto again = listener::listen(where);
    ASSERT_TRUE(again) << again.error().message();
    ASSERT_TRUE((*rt)->run(0, [&] { srv.reset(); }));
}

// A server stopped from another vCPU while its handlers end by themselves (their clients
// write): stop() interrupts the handlers still running. It walked the server's list of them
// from the stopping vCPU while the server's vCPU took ending handlers off it and freed them,
// and crashed within a few rounds; it now does that walk on the server's vCPU.
TEST_P(accept_test, a_server_stopped_from_another_vcpu_while_its_handlers_end_stops_them_all) {
    auto rt = runtime::start(test::test_runtime(2, GetParam()));
    ASSERT_TRUE(rt) << rt.error().message();
    constexpr int rounds = 40, conns = 400;  // 800 fds: under the usual limit of 1024
    for (int round = 0; round < rounds; ++round) {
        std::atomic<int> started{0}, ended{0};
        std::unique_ptr<server> srv;
        ASSERT_TRUE((*rt)->run(0, [&] {
            auto s = server::start(address::ipv4_loopback(0), [&](byte_stream& c) {
                ++started;
                char b;
                (void)c.read_some(&b, 1);  // a byte, the end, or the stop's interrupt
                ++ended;
            });
            ASSERT_TRUE(s) << s.error().message();
            srv = std::move(*s);
        }));
        ASSERT_TRUE(srv);
        const address where = srv->local_address();
        std::vector<int> clients;
        for (int i = 0; i < conns; ++i) {  // plain blocking sockets: the server's vCPU accepts
            const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            ASSERT_GE(c, 0);
            clients.push_back(c);
            ASSERT_EQ(::connect(c, where.data(), where.size()), 0);
        }
        for (int i = 0; i < 5000 && started < conns; ++i) (void)this_fiber::sleep_for(1ms);
        ASSERT_EQ(started, conns);
        std::atomic<bool> go{false};
        std::thread writer([&] {
            while (!go) std::this_thread::yield();
            // Last connected first: the handlers that end by themselves are those the stop's
            // walk, from the first, has not reached yet.
            for (auto c = clients.rbegin(); c != clients.rend(); ++c) (void)::send(*c, "x", 1, MSG_NOSIGNAL);
        });
        go = true;
        ASSERT_TRUE((*rt)->run(1, [&] { srv->stop(duration::zero()); }));
        writer.join();
        EXPECT_EQ(ended, conns) << "round " << round;
        ASSERT_TRUE((*rt)->run(0, [&] { srv.reset(); }));
        for (int c : clients) ::close(c);
    }
}

// A server's counters are read from other threads (sharded_server::accepted reads its shards')
// while its vCPU accepts: they are atomics (a thread sanitizer reported plain ones here).
TEST_P(accept_test, a_servers_counters_can_be_watched_from_another_vcpu) {
    auto rt = runtime::start(test::test_runtime(2, GetParam()));
    ASSERT_TRUE(rt) << rt.error().message();
    std::unique_ptr<server> srv;
    ASSERT_TRUE((*rt)->run(0, [&] {
        auto s = server::start(address::ipv4_loopback(0), [](byte_stream& c) {
            uint32_t v = 0;
            (void)c.read_exactly(&v, sizeof v, 5s);
        });
        ASSERT_TRUE(s) << s.error().message();
        srv = std::move(*s);
    }));
    ASSERT_TRUE(srv);
    const address where = srv->local_address();
    constexpr uint32_t n = 20;
    std::vector<stream> clients;
    for (uint32_t i = 0; i < n; ++i) {
        auto c = stream::connect(where, 5s);
        ASSERT_TRUE(c) << c.error().message();
        clients.push_back(std::move(*c));
        (void)srv->accepted();  // read while the server's vCPU may be counting
        (void)srv->active();
    }
    EXPECT_TRUE(test::eventually([&] { return srv->accepted() == n; }));
    for (uint32_t i = 0; i < n; ++i) ASSERT_TRUE(clients[i].write_all(&i, sizeof i, 5s));
    EXPECT_TRUE(test::eventually([&] { return srv->active() == 0; }));
    EXPECT_EQ(srv->wrap_failures(), 0u);
    ASSERT_TRUE((*rt)->run(0, [&] { srv.reset(); }));
}

// accept() and accept(peer) on one listener take from the same place: on io_uring the first
// accept() arms the multishot accept, which takes the next connection from the kernel, and an
// accept(peer) that made an accept(2) of its own waited on an empty backlog while it sat there.
TEST_P(accept_test, accept_with_the_peer_address_gets_what_the_shared_accept_took) {
    auto l = listener::listen(address::ipv4_loopback(0));
    ASSERT_TRUE(l);
    auto where = l->local_address();
    ASSERT_TRUE(where);
    for (uint32_t i = 0; i < 3; ++i) {
        auto c = connect_numbered(*where, 2 * i);
        auto s = l->accept(5s);
        ASSERT_TRUE(s) << s.error().message();
        EXPECT_EQ(read_number(*s), 2 * i);
        auto d = connect_numbered(*where, 2 * i + 1);
        address peer;
        auto t = l->accept(peer, 5s);
        ASSERT_TRUE(t) << i << ": " << t.error().message();
        EXPECT_EQ(read_number(*t), 2 * i + 1);
        EXPECT_EQ(peer.to_string(), d.local_address()->to_string());
    }
}

// An accept that timed out leaves nothing behind: the next one gets the next connection.
TEST_P(accept_test, an_accept_that_times_out_leaves_the_listener_working) {
    auto l = listener::listen(address::ipv4_loopback(0));
    ASSERT_TRUE(l);
    auto where = l->local_address();
    ASSERT_TRUE(where);
    for (uint32_t i = 0; i < 3; ++i) {
        auto none = l->accept(10ms);
        ASSERT_FALSE(none);
        EXPECT_EQ(none.error(), std::errc::timed_out);
        auto c = connect_numbered(*where, i);
        auto s = l->accept(5s);
        ASSERT_TRUE(s) << s.error().message();
        EXPECT_EQ(read_number(*s), i);
    }
}

}  // namespace
}  // namespace gluon::net
