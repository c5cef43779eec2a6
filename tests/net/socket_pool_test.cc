#include "gluon/net/socket_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "gluon/net/resolver.h"
#include "gluon/net/server.h"
#include "gluon/runtime/fd.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/runtime.h"
#include "test_support.h"

namespace gluon::net {
namespace {

using namespace std::chrono_literals;

class socket_pool_test : public test::engine_test {};
GLUON_ENGINE_TEST_SUITE(socket_pool_test);

// An echo server; `replies` bounds the messages echoed per connection before the server closes
// it (0: no bound).
std::unique_ptr<server> echo_server(int replies = 0) {
    auto srv = server::start(address::ipv4_loopback(0), [replies](byte_stream& s) {
        char buf[256];
        for (int i = 0; replies == 0 || i < replies; ++i) {
            auto n = s.read_some(buf, sizeof buf, 10s);
            if (!n || *n == 0 || !s.write_all(buf, *n, 10s)) return;
        }
    });
    EXPECT_TRUE(srv);
    return srv ? std::move(*srv) : nullptr;
}

// One request/response on a leased connection.
void ping(socket_pool::lease& l, const std::string& msg = "ping") {
    ASSERT_TRUE(l->write_all(msg.data(), msg.size(), 5s));
    std::string in(msg.size(), '\0');
    ASSERT_TRUE(l->read_exactly(in.data(), in.size(), 5s));
    EXPECT_EQ(in, msg);
}

uint16_t local_port(socket_pool::lease& l) { return l->local_address()->port(); }

// Parks until the peer's FIN (or unsolicited data) has reached l's socket.
void wait_for_peer(socket_pool::lease& l) {
    auto ev = fd::poll(l->get(), POLLIN | POLLRDHUP, 5s);
    ASSERT_TRUE(ev) << ev.error().message();
}

TEST_P(socket_pool_test, a_released_connection_is_reused) {
    auto srv = echo_server();
    ASSERT_TRUE(srv);
    socket_pool pool;
    auto a = pool.get(srv->local_address());
    ASSERT_TRUE(a) << a.error().message();
    EXPECT_FALSE(a->reused());
    ping(*a);
    const uint16_t port = local_port(*a);
    a->release();
    EXPECT_FALSE(*a);
    EXPECT_EQ(pool.stats().idle, 1u);
    auto b = pool.get(srv->local_address());
    ASSERT_TRUE(b);
    EXPECT_TRUE(b->reused());
    EXPECT_EQ(local_port(*b), port);
    ping(*b, "again");
    auto st = pool.stats();
    EXPECT_EQ(st.hits, 1u);
    EXPECT_EQ(st.misses, 1u);
    EXPECT_EQ(st.idle, 0u);

    // By name: its own key, reused the same way.
    auto c = pool.get("LOCALHOST", srv->local_address().port());
    ASSERT_TRUE(c) << c.error().message();
    EXPECT_FALSE(c->reused());
    const uint16_t by_name = local_port(*c);
    c->release();
    auto d = pool.get("localhost", srv->local_address().port());
    ASSERT_TRUE(d);
    EXPECT_TRUE(d->reused());
    EXPECT_EQ(local_port(*d), by_name);
    ping(*d);
}

TEST_P(socket_pool_test, a_lease_dropped_without_release_is_closed) {
    auto srv = echo_server();
    ASSERT_TRUE(srv);
    socket_pool pool;
    {
        auto a = pool.get(srv->local_address());
        ASSERT_TRUE(a);
        ping(*a);
    }
    auto b = pool.get(srv->local_address());
    ASSERT_TRUE(b);
    EXPECT_FALSE(b->reused());
    socket_pool::lease moved = std::move(*b);
    EXPECT_FALSE(*b);
    ping(moved);
    moved = socket_pool::lease();  // closes
    EXPECT_EQ(pool.stats().idle, 0u);
    EXPECT_EQ(pool.stats().misses, 2u);
}

TEST_P(socket_pool_test, connections_the_peer_closed_or_wrote_to_are_not_reused) {
    auto srv = echo_server(1);  // closes after one echo
    ASSERT_TRUE(srv);
    socket_pool pool;
    auto a = pool.get(srv->local_address());
    ASSERT_TRUE(a);
    ping(*a);
    const uint16_t first = local_port(*a);
    wait_for_peer(*a);
    a->release();
    auto b = pool.get(srv->local_address());
    ASSERT_TRUE(b);
    EXPECT_FALSE(b->reused());
    EXPECT_NE(local_port(*b), first);
    EXPECT_EQ(pool.stats().discarded, 1u);

    // A server that talks out of turn: the unread bytes make the connection's state unknown.
    auto chatty = server::start(address::ipv4_loopback(0), [](byte_stream& s) {
        (void)s.write_all("unasked", 7, 5s);
        char c;
        (void)s.read_some(&c, 1, 10s);
    });
    ASSERT_TRUE(chatty);
    auto c = pool.get((*chatty)->local_address());
    ASSERT_TRUE(c);
    wait_for_peer(*c);
    c->release();
    auto d = pool.get((*chatty)->local_address());
    ASSERT_TRUE(d);
    EXPECT_FALSE(d->reused());
    EXPECT_EQ(pool.stats().discarded, 2u);
}

TEST_P(socket_pool_test, a_connection_reading_ahead_with_unread_input_is_not_reused) {
    // On io_uring a stream that reads ahead has its unread bytes taken off the socket by the
    // engine: the kernel's socket is empty, yet the connection has input nobody asked for.
    auto srv = echo_server();
    ASSERT_TRUE(srv);
    socket_pool pool;
    auto a = pool.get(srv->local_address());
    ASSERT_TRUE(a);
    (*a)->read_ahead();
    ping(*a, "1");
    ping(*a, "2");  // from the second read on, the receive stays armed
    ASSERT_TRUE((*a)->write_all("ab", 2, 5s));
    char first = 0;
    ASSERT_TRUE((*a)->read_exactly(&first, 1, 5s));  // "b" stays unread
    EXPECT_EQ(first, 'a');
    // Until the "b" has come (to the socket, or into the engine's hands).
    deadline_t until = deadline_after(5s);
    while (!fd::poll((*a)->get(), POLLIN, duration::zero()) && mono_now_ns() < until)
        ASSERT_TRUE(this_fiber::sleep_for(1ms));
    a->release();
    auto b = pool.get(srv->local_address());
    ASSERT_TRUE(b);
    EXPECT_FALSE(b->reused());
    EXPECT_EQ(pool.stats().discarded, 1u);
}

TEST_P(socket_pool_test, idle_connections_expire) {
    auto srv = echo_server();
    ASSERT_TRUE(srv);
    socket_pool pool({.idle_timeout = 1ns});
    auto a = pool.get(srv->local_address());
    ASSERT_TRUE(a);
    a->release();
    auto b = pool.get(srv->local_address());  // the idle one is past its time already
    ASSERT_TRUE(b);
    EXPECT_FALSE(b->reused());
    auto st = pool.stats();
    EXPECT_EQ(st.discarded, 1u);
    EXPECT_EQ(st.misses, 2u);
    EXPECT_EQ(st.idle, 0u);
}

TEST_P(socket_pool_test, at_most_max_idle_per_key_are_kept) {
    auto srv = echo_server();
    ASSERT_TRUE(srv);
    auto other = echo_server();
    ASSERT_TRUE(other);
    socket_pool pool({.max_idle_per_key = 2});
    std::vector<socket_pool::lease> out;
    std::vector<uint16_t> ports;
    for (int i = 0; i < 3; ++i) {
        auto l = pool.get(srv->local_address());
        ASSERT_TRUE(l);
        ports.push_back(local_port(*l));
        out.push_back(std::move(*l));
    }
    auto o = pool.get(other->local_address());
    ASSERT_TRUE(o);
    o->release();  // another key: its own bound
    for (auto& l : out) l.release();
    auto st = pool.stats();
    EXPECT_EQ(st.idle, 3u);
    EXPECT_EQ(st.discarded, 1u);  // the oldest of the three
    // The most recently released comes back first.
    auto x = pool.get(srv->local_address());
    auto y = pool.get(srv->local_address());
    auto z = pool.get(srv->local_address());
    ASSERT_TRUE(x && y && z);
    EXPECT_EQ(local_port(*x), ports[2]);
    EXPECT_EQ(local_port(*y), ports[1]);
    EXPECT_FALSE(z->reused());
    ping(*x);
    ping(*y);
    pool.clear();
    EXPECT_EQ(pool.stats().idle, 0u);
}

TEST_P(socket_pool_test, errors_and_a_lease_that_outlives_its_pool) {
    auto l = listener::listen(address::ipv4_loopback(0));
    ASSERT_TRUE(l);
    const address where = *l->local_address();
    socket_pool::lease survivor;
    {
        socket_pool pool({.connect_timeout = 2s});
        auto a = pool.get(where);
        ASSERT_TRUE(a);
        survivor = std::move(*a);
        EXPECT_EQ(pool.get("nothing.invalid", 80).error().category(), dns_category());
    }
    survivor.release();  // the pool is gone: closed
    EXPECT_FALSE(survivor);
    ASSERT_TRUE(l->close());
    socket_pool pool;
    EXPECT_EQ(pool.get(where).error(), std::errc::connection_refused);
    EXPECT_EQ(pool.stats().misses, 1u);
}

TEST_P(socket_pool_test, fibers_on_two_vcpus_share_a_pool) {
    auto srv = echo_server();
    ASSERT_TRUE(srv);
    constexpr int fibers_per_vcpu = 4, rounds = 50;
    socket_pool pool({.max_idle_per_key = fibers_per_vcpu});
    std::atomic<int> failures{0};
    {
        auto rt = runtime::start(test::test_runtime(2, GetParam()));
        ASSERT_TRUE(rt);
        auto work = [&] {
            std::vector<fiber> fs;
            fs.reserve(fibers_per_vcpu);
            for (int i = 0; i < fibers_per_vcpu; ++i)
                fs.push_back(*spawn([&, i] {
                    for (int r = 0; r < rounds; ++r) {
                        auto l = pool.get(srv->local_address());
                        std::string msg = std::to_string(i) + "/" + std::to_string(r);
                        std::string in(msg.size(), '\0');
                        if (!l || !(*l)->write_all(msg.data(), msg.size(), 5s) ||
                            !(*l)->read_exactly(in.data(), in.size(), 5s) || in != msg) {
                            ++failures;
                            continue;
                        }
                        l->release();
                        this_fiber::yield();  // let the other fibers of this vCPU interleave
                    }
                }));
            for (auto& f : fs) (void)f.join();
        };
        // Each run() parks a fiber of this vCPU, which keeps serving the echo connections.
        auto on0 = spawn([&] { ASSERT_TRUE((*rt)->run(0, work)); });
        auto on1 = spawn([&] { ASSERT_TRUE((*rt)->run(1, work)); });
        ASSERT_TRUE(on0->join());
        ASSERT_TRUE(on1->join());
    }  // the vCPUs end before the pool closes their idle connections
    EXPECT_EQ(failures.load(), 0);
    auto st = pool.stats();
    EXPECT_EQ(st.hits + st.misses, 2u * fibers_per_vcpu * rounds);
    EXPECT_LE(st.misses, 2u * fibers_per_vcpu);  // each vCPU needs at most one per fiber
    EXPECT_GT(st.hits, 0u);
    EXPECT_LE(st.idle, 2u * fibers_per_vcpu);
    EXPECT_EQ(srv->accepted(), st.misses);
}

// A connection that reads ahead, got on another vCPU: on io_uring that vCPU's engine keeps a
// receive armed on it, which held the socket open when the connection was closed from here
// (the pool cleared, a lease dropped), so the server saw the end only once its own read timed
// out. Closed off its vCPU, it is shut down first.
TEST_P(socket_pool_test, connections_of_another_vcpu_closed_here_end_at_the_peer) {
    std::atomic<int> ended{0};
    auto srv = server::start(address::ipv4_loopback(0), [&](byte_stream& s) {
        char buf[64];
        for (;;) {  // echoes until the end of the stream, or for 30 s of silence
            auto n = s.read_some(buf, sizeof buf, 30s);
            if (!n || *n == 0 || !s.write_all(buf, *n, 5s)) break;
        }
        ++ended;
    });
    ASSERT_TRUE(srv) << srv.error().message();
    const address where = (*srv)->local_address();
    auto rt = runtime::start(test::test_runtime(2, GetParam()));
    ASSERT_TRUE(rt);
    socket_pool pool;
    socket_pool::lease kept;
    ASSERT_TRUE((*rt)->run(1, [&] {
        auto a = pool.get(where);
        auto b = pool.get(where);
        ASSERT_TRUE(a && b);
        for (auto* l : {&*a, &*b}) {
            (*l)->read_ahead();
            for (int r = 0; r < 3; ++r) ping(*l, "r");  // from the second read on, the receive stays armed
        }
        a->release();
        kept = std::move(*b);
    }));
    ASSERT_EQ(pool.stats().idle, 1u);
    pool.clear();  // here, while vCPU 1 runs on
    EXPECT_TRUE(test::eventually([&] { return ended == 1; }, 5s)) << "the pooled connection did not end";
    kept = socket_pool::lease();  // a lease dropped here
    EXPECT_TRUE(test::eventually([&] { return ended == 2; }, 5s)) << "the dropped lease did not end";
}

// A lease released on another vCPU than the one it was got on goes back to that vCPU's pool:
// a stream that reads ahead must be read on its own vCPU only. It was pooled where it was
// released, and handed out there.
TEST_P(socket_pool_test, a_lease_released_on_another_vcpu_is_pooled_for_its_own) {
    auto srv = echo_server();
    ASSERT_TRUE(srv);
    auto rt = runtime::start(test::test_runtime(2, GetParam()));
    ASSERT_TRUE(rt);
    socket_pool pool;
    socket_pool::lease moved;
    uint16_t port = 0;
    ASSERT_TRUE((*rt)->run(1, [&] {
        auto l = pool.get(srv->local_address());
        ASSERT_TRUE(l) << l.error().message();
        (*l)->read_ahead();
        for (int r = 0; r < 3; ++r) ping(*l, "r");
        port = local_port(*l);
        moved = std::move(*l);
    }));
    ASSERT_TRUE((*rt)->run(0, [&] {
        moved.release();
        EXPECT_EQ(pool.stats().idle, 1u);
        auto l = pool.get(srv->local_address());
        ASSERT_TRUE(l);
        EXPECT_FALSE(l->reused());  // not vCPU 0's
        EXPECT_NE(local_port(*l), port);
    }));
    ASSERT_TRUE((*rt)->run(1, [&] {
        auto l = pool.get(srv->local_address());
        ASSERT_TRUE(l);
        EXPECT_TRUE(l->reused());
        EXPECT_EQ(local_port(*l), port);
        for (int r = 0; r < 3; ++r) ping(*l, "again");
        l->release();
    }));
}

// Idle connections of a vCPU that has ended are swept once expired, by whichever vCPU uses the
// pool: each vCPU swept only its own, and a vCPU's index never comes back, so they stayed open
// for as long as the pool lived.
TEST_P(socket_pool_test, idle_connections_of_an_ended_vcpu_expire) {
    auto srv = echo_server();
    ASSERT_TRUE(srv);
    socket_pool pool({.idle_timeout = 20ms});
    {
        auto rt = runtime::start(test::test_runtime(1, GetParam()));
        ASSERT_TRUE(rt);
        ASSERT_TRUE((*rt)->run(0, [&] {
            auto l = pool.get(srv->local_address());
            ASSERT_TRUE(l) << l.error().message();
            ping(*l);
            l->release();
        }));
    }  // the vCPU ends; its connection stays in the pool, idle
    ASSERT_EQ(pool.stats().idle, 1u);
    // Each get() here may sweep; the ended vCPU's connection goes once past idle_timeout.
    EXPECT_TRUE(test::eventually([&] {
        auto l = pool.get(srv->local_address());
        return l && l->close() && pool.stats().idle == 0;
    }));
    EXPECT_EQ(pool.stats().discarded, 1u);
}

}  // namespace
}  // namespace gluon::net
