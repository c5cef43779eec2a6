// Streams that read ahead (stream::read_ahead, fd::recv_ahead) on every engine. On io_uring one
// multishot receive stays armed on the socket and reads copy from the engine's buffers; these
// tests pin down that nothing is lost, reordered, kept from the wrong socket or held open by it.
// On epoll the same calls are plain receives and must pass the same way.
#include <gtest/gtest.h>

#include <poll.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "gluon/engine/engine.h"
#include "gluon/net/server.h"
#include "gluon/net/socket.h"
#include "gluon/runtime/fd.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/runtime.h"
#include "gluon/runtime/vcpu.h"
#include "test_support.h"

namespace gluon::net {
namespace {

using namespace std::chrono_literals;

class read_ahead_test : public test::engine_test {};
GLUON_ENGINE_TEST_SUITE(read_ahead_test);

// A connected TCP pair: `ahead` reads ahead, `peer` is a plain stream.
struct tcp_pair {
    stream ahead, peer;
};

tcp_pair connected_pair() {
    auto l = listener::listen(address::ipv4_loopback(0));
    EXPECT_TRUE(l) << l.error().message();
    auto where = l->local_address();
    auto c = stream::connect(*where, 5s);
    EXPECT_TRUE(c) << c.error().message();
    auto s = l->accept(5s);
    EXPECT_TRUE(s) << s.error().message();
    s->read_ahead();
    // A socket's first read is single-shot; from the second on, a multishot receive is armed.
    char w = 0;
    EXPECT_TRUE(c->write_all("w", 1, 5s));
    EXPECT_TRUE(s->read_exactly(&w, 1, 5s));
    EXPECT_EQ(w, 'w');
    return {std::move(*s), std::move(*c)};
}

uint8_t pattern(size_t i) { return static_cast<uint8_t>((i * 131 + i / 251) & 0xff); }

unsigned buffers_out() { return current_engine()->pooled_buffers_out(); }

// Data that arrives in many pieces while nobody reads (more than the engine keeps before it
// stops taking data ahead) is all read, in order, by reads of every size.
TEST_P(read_ahead_test, data_that_arrives_while_nobody_reads_comes_out_whole_and_in_order) {
    auto [a, p] = connected_pair();
    uint8_t first = 0;
    auto sender = spawn([&p] {
        constexpr size_t total = 300 * 1000;
        std::vector<uint8_t> b(1000);
        for (size_t off = 0; off < total; off += b.size()) {
            for (size_t i = 0; i < b.size(); ++i) b[i] = pattern(off + i);
            ASSERT_TRUE(p.write_all(b.data(), b.size(), 5s));
            if (off == 0) (void)this_fiber::yield();
        }
    });
    ASSERT_TRUE(sender);
    ASSERT_TRUE(a.read_exactly(&first, 1, 5s));  // arms the receive; the rest comes unasked
    EXPECT_EQ(first, pattern(0));
    for (int i = 0; i < 20; ++i) (void)this_fiber::sleep_for(1ms);  // nobody reads meanwhile
    size_t at = 1;
    std::vector<uint8_t> b(4096);
    size_t step = 1;
    while (at < 300 * 1000) {
        const size_t want = std::min(step, 300 * 1000 - at);
        auto n = a.read_some(b.data(), want, 5s);
        ASSERT_TRUE(n) << at << ": " << n.error().message();
        ASSERT_GT(*n, 0u);
        for (size_t i = 0; i < *n; ++i) ASSERT_EQ(b[i], pattern(at + i)) << "byte " << at + i;
        at += *n;
        step = step * 3 % 4093 + 1;  // 1, 4, 13, 40, ... every size up to the buffer
    }
    ASSERT_TRUE(sender->join());
    EXPECT_EQ(at, 300u * 1000);
}

// A bulk transfer (every buffer the receive takes comes full) goes back to single-shot
// receives on the way: every byte arrives, in order, across the switch.
TEST_P(read_ahead_test, a_bulk_transfer_switches_to_plain_receives_and_loses_nothing) {
    auto [a, p] = connected_pair();
    constexpr size_t total = 16 << 20;
    auto sender = spawn([&p] {
        std::vector<uint8_t> b(256 * 1024);
        for (size_t off = 0; off < total; off += b.size()) {
            for (size_t i = 0; i < b.size(); ++i) b[i] = pattern(off + i);
            ASSERT_TRUE(p.write_all(b.data(), b.size(), 10s));
        }
    });
    ASSERT_TRUE(sender);
    std::vector<uint8_t> b(64 * 1024);
    size_t at = 0;
    while (at < total) {
        auto n = a.read_some(b.data(), b.size(), 10s);
        ASSERT_TRUE(n) << at << ": " << n.error().message();
        ASSERT_GT(*n, 0u);
        for (size_t i = 0; i < *n; ++i) ASSERT_EQ(b[i], pattern(at + i)) << "byte " << at + i;
        at += *n;
    }
    ASSERT_TRUE(sender->join());
    EXPECT_EQ(buffers_out(), 0u);
}

// A read with less room than what arrived takes a part; the next reads take the rest, and a
// readiness poll reports the part kept (the socket itself is empty by then).
TEST_P(read_ahead_test, a_small_read_leaves_the_rest_for_the_next_and_poll_sees_it) {
    auto [a, p] = connected_pair();
    char got = 0;
    auto reader = spawn([&a, &got] { ASSERT_TRUE(a.read_some(&got, 1, 5s)); });
    ASSERT_TRUE(reader);
    (void)this_fiber::yield();  // the reader waits with its one-byte buffer
    ASSERT_TRUE(p.write_all("hello world", 11, 5s));
    ASSERT_TRUE(reader->join());
    EXPECT_EQ(got, 'h');
    auto ready = fd::poll(a.get(), POLLIN, 2s);
    ASSERT_TRUE(ready) << ready.error().message();
    EXPECT_TRUE(*ready & POLLIN);
    auto look = fd::poll(a.get(), POLLIN, 0s);  // a zero-timeout look sees the kept part too
    ASSERT_TRUE(look) << look.error().message();
    EXPECT_TRUE(*look & POLLIN);
    char rest[16] = {};
    size_t have = 0;
    while (have < 10) {
        auto n = a.read_some(rest + have, sizeof rest - have, 5s);
        ASSERT_TRUE(n) << n.error().message();
        ASSERT_GT(*n, 0u);
        have += *n;
    }
    EXPECT_EQ(std::string(rest, have), "ello world");
    look = fd::poll(a.get(), POLLIN, 0s);  // nothing kept, nothing in the socket
    ASSERT_FALSE(look);
    EXPECT_EQ(look.error(), std::errc::timed_out);
}

// Two fibers reading at once, each with less room than what arrives: the second takes the part
// the first left, not the next arrival. On io_uring the second waited on after the first took
// its part of "abcdefgh", and got "ijkl", while "efgh", kept, went to a read after it.
TEST_P(read_ahead_test, two_reads_at_once_take_the_data_in_the_order_it_came) {
    auto [a, p] = connected_pair();
    std::string got[2];
    int started = 0;
    std::vector<fiber> readers;
    for (int i = 0; i < 2; ++i) {
        auto f = spawn([&a, &got, &started] {
            char b[4];
            std::string& g = got[started++];  // in the order they wait (nothing runs between)
            auto n = a.read_some(b, sizeof b, 5s);
            ASSERT_TRUE(n) << n.error().message();
            g.assign(b, *n);
        });
        ASSERT_TRUE(f);
        readers.push_back(std::move(*f));
    }
    while (started < 2) (void)this_fiber::yield();
    (void)this_fiber::yield();  // both wait in their reads
    ASSERT_TRUE(p.write_all("abcdefgh", 8, 5s));
    ASSERT_TRUE(test::eventually([&] { return !got[0].empty(); }, 5s));
    ASSERT_TRUE(p.write_all("ijkl", 4, 5s));
    for (fiber& r : readers) ASSERT_TRUE(r.join());
    char b[8];
    auto n = a.read_some(b, sizeof b, 5s);
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(got[0] + got[1] + std::string(b, *n), "abcdefghijkl");
}

// The peer's end of stream reads as 0 after the data, and again on every later read.
TEST_P(read_ahead_test, the_end_of_the_stream_reads_zero_after_the_data_every_time) {
    auto [a, p] = connected_pair();
    ASSERT_TRUE(p.write_all("bye", 3, 5s));
    ASSERT_TRUE(p.shutdown(SHUT_WR));
    char b[8];
    ASSERT_TRUE(a.read_exactly(b, 3, 5s));
    EXPECT_EQ(std::string(b, 3), "bye");
    for (int i = 0; i < 3; ++i) {
        auto n = a.read_some(b, sizeof b, 5s);
        ASSERT_TRUE(n) << n.error().message();
        EXPECT_EQ(*n, 0u);
    }
}

// A read that times out leaves the stream working: the next read gets the data.
TEST_P(read_ahead_test, a_read_that_times_out_leaves_the_stream_working) {
    auto [a, p] = connected_pair();
    char b[8];
    for (int i = 0; i < 3; ++i) {
        auto none = a.read_some(b, sizeof b, 10ms);
        ASSERT_FALSE(none);
        EXPECT_EQ(none.error(), std::errc::timed_out);
        const char c = static_cast<char>('a' + i);
        ASSERT_TRUE(p.write_all(&c, 1, 5s));
        auto n = a.read_some(b, sizeof b, 5s);
        ASSERT_TRUE(n) << n.error().message();
        ASSERT_EQ(*n, 1u);
        EXPECT_EQ(b[0], c);
    }
}

// Closing a stream whose receive is armed (data was read and more may come) closes the
// connection at once: the peer reads the end of the stream, and no engine buffer stays out.
TEST_P(read_ahead_test, closing_the_stream_closes_the_connection_at_once) {
    auto [a, p] = connected_pair();
    ASSERT_TRUE(p.write_all("x", 1, 5s));
    char b;
    ASSERT_TRUE(a.read_exactly(&b, 1, 5s));
    ASSERT_TRUE(p.write_all("kept", 4, 5s));  // may be taken ahead, unread, when we close
    (void)this_fiber::sleep_for(2ms);
    ASSERT_TRUE(a.close());
    char r[8];
    auto n = p.read_some(r, sizeof r, 5s);  // EOF or a reset (unread data), never a timeout
    EXPECT_TRUE((n && *n == 0) || (!n && n.error() == std::errc::connection_reset))
        << (n ? "data" : n.error().message());
    EXPECT_EQ(buffers_out(), 0u);
}

// Closing a stream that another fiber is reading fails that read at once (EBADF) and ends
// the connection: for the first read of a socket (a single receive in the kernel) as for later
// ones (the armed multishot receive), and on plain streams too.
TEST_P(read_ahead_test, closing_fails_a_read_parked_on_the_stream_at_once) {
    for (int reads_before : {0, 1}) {
        for (bool ahead : {true, false}) {
            SCOPED_TRACE(testing::Message() << "reads before: " << reads_before << ", read ahead: " << ahead);
            auto l = listener::listen(address::ipv4_loopback(0));
            ASSERT_TRUE(l);
            auto s = stream::connect(*l->local_address(), 5s);
            ASSERT_TRUE(s);
            auto c = l->accept(5s);
            ASSERT_TRUE(c);
            if (ahead) s->read_ahead();
            for (int i = 0; i < reads_before; ++i) {
                char w = 0;
                ASSERT_TRUE(c->write_all("w", 1, 5s));
                ASSERT_TRUE(s->read_exactly(&w, 1, 5s));
            }
            bool started = false;
            std::error_code got;
            auto reader = spawn([&] {
                char b[16];
                ASSERT_TRUE(s->write_all("request", 7, 5s));  // (as a client: it asks, then waits)
                started = true;
                auto r = s->read_some(b, sizeof b, 10s);
                if (!r) got = r.error();
            });
            ASSERT_TRUE(reader);
            while (!started) this_fiber::yield();
            this_fiber::yield();  // the reader runs on until it parks in its read
            current_engine()->flush();  // and its receive is in the kernel, not only queued
            const auto t0 = std::chrono::steady_clock::now();
            ASSERT_TRUE(s->close());
            ASSERT_TRUE(reader->join());
            EXPECT_EQ(got, std::errc::bad_file_descriptor) << got.message();
            EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
            char r[8];
            ASSERT_TRUE(c->read_exactly(r, 7, 5s));
            auto n = c->read_some(r, sizeof r, 5s);  // then the peer sees the end at once
            EXPECT_TRUE(n && *n == 0) << (n ? "data" : n.error().message());
        }
    }
}

// A socket that gets the number of a closed one starts afresh: nothing kept for the old one
// (its data, its end of stream) is read from the new one.
TEST_P(read_ahead_test, a_new_socket_on_a_closed_ones_number_starts_afresh) {
    int reused = 0;
    for (int round = 0; round < 3; ++round) {
        auto [a, p] = connected_pair();
        const int old_fd = a.get();
        ASSERT_TRUE(p.write_all("old!", 4, 5s));
        ASSERT_TRUE(p.shutdown(SHUT_WR));
        char b[8];
        ASSERT_TRUE(a.read_some(b, 1, 5s));  // the rest, and the end, may be kept
        ASSERT_TRUE(a.close());
        auto sp = stream::pair();  // the lowest free numbers: the closed one among them
        ASSERT_TRUE(sp) << sp.error().message();
        if (sp->second.get() == old_fd) std::swap(sp->first, sp->second);
        auto& [x, y] = *sp;
        if (x.get() != old_fd) continue;
        ++reused;
        x.read_ahead();
        ASSERT_TRUE(y.write_all("new", 3, 5s));
        ASSERT_TRUE(x.read_exactly(b, 3, 5s));
        EXPECT_EQ(std::string(b, 3), "new");
        auto none = x.read_some(b, sizeof b, 10ms);  // no old data, no old end of stream
        ASSERT_FALSE(none);
        EXPECT_EQ(none.error(), std::errc::timed_out);
    }
    EXPECT_GT(reused, 0);
}

// More data waiting unread on many sockets than the engine has buffers: the receives that run
// out fall back to plain ones, and every byte still arrives, in order, on its own socket.
TEST_P(read_ahead_test, running_out_of_engine_buffers_loses_nothing) {
    constexpr int conns = 48;
    constexpr size_t each = 128 * 1024;
    std::vector<tcp_pair> ps;
    for (int i = 0; i < conns; ++i) ps.push_back(connected_pair());
    std::vector<fiber> senders;
    for (int i = 0; i < conns; ++i) {
        auto f = spawn([&ps, i] {
            std::vector<uint8_t> b(16 * 1024);
            for (size_t off = 0; off < each; off += b.size()) {
                for (size_t k = 0; k < b.size(); ++k) b[k] = pattern(off + k + static_cast<size_t>(i));
                ASSERT_TRUE(ps[i].peer.write_all(b.data(), b.size(), 10s));
            }
        });
        ASSERT_TRUE(f);
        senders.push_back(std::move(*f));
    }
    // Arm every socket's receive, then let the data pile up unread.
    for (int i = 0; i < conns; ++i) {
        uint8_t c;
        ASSERT_TRUE(ps[i].ahead.read_exactly(&c, 1, 5s));
        EXPECT_EQ(c, pattern(static_cast<size_t>(i)));
    }
    for (int i = 0; i < 20; ++i) (void)this_fiber::sleep_for(1ms);
    std::vector<uint8_t> b(64 * 1024);
    for (int i = 0; i < conns; ++i) {
        size_t at = 1;
        while (at < each) {
            auto n = ps[i].ahead.read_some(b.data(), std::min(b.size(), each - at), 10s);
            ASSERT_TRUE(n) << i << " at " << at << ": " << n.error().message();
            ASSERT_GT(*n, 0u);
            for (size_t k = 0; k < *n; ++k)
                ASSERT_EQ(b[k], pattern(at + k + static_cast<size_t>(i))) << "socket " << i << " byte " << at + k;
            at += *n;
        }
    }
    for (auto& f : senders) ASSERT_TRUE(f.join());
    ps.clear();
    EXPECT_EQ(buffers_out(), 0u);
}

// A server whose connections read ahead, stopped while they wait for input: their fibers are
// interrupted, which cancels their armed receives, and every connection is closed at once (the
// clients see the end). The server runs on a runtime vCPU of its own, as servers do.
TEST_P(read_ahead_test, stopping_a_read_ahead_server_closes_its_waiting_connections) {
    auto rt = runtime::start(test::test_runtime(1, GetParam()));
    ASSERT_TRUE(rt) << rt.error().message();
    std::unique_ptr<server> srv;
    ASSERT_TRUE((*rt)->run(0, [&] {
        server_options o;
        o.read_ahead = true;
        auto s = server::start(address::ipv4_loopback(0),
                               [](byte_stream& c) {
                                   char b[64];
                                   for (;;) {  // echo until the end of the stream or a stop
                                       auto n = c.read_some(b, sizeof b);
                                       if (!n || *n == 0 || !c.write_all(b, *n, 5s)) return;
                                   }
                               },
                               o);
        ASSERT_TRUE(s) << s.error().message();
        srv = std::move(*s);
    }));
    ASSERT_TRUE(srv);
    std::vector<stream> clients;
    for (int i = 0; i < 4; ++i) {
        auto c = stream::connect(srv->local_address(), 5s);
        ASSERT_TRUE(c);
        char b[4];
        ASSERT_TRUE(c->write_all("ping", 4, 5s));
        ASSERT_TRUE(c->read_exactly(b, 4, 5s));  // served: its receive is armed now
        clients.push_back(std::move(*c));
    }
    ASSERT_TRUE((*rt)->run(0, [&] { srv->stop(0s); }));  // from the server's vCPU, as it asks
    for (auto& c : clients) {
        char b;
        auto n = c.read_some(&b, 1, 5s);
        EXPECT_TRUE((n && *n == 0) || (!n && n.error() == std::errc::connection_reset))
            << (n ? "data" : n.error().message());
    }
    ASSERT_TRUE((*rt)->run(0, [&] { srv.reset(); }));
}

}  // namespace
}  // namespace gluon::net
