// byte_stream's contract, checked the same way on every transport (TCP, Unix, TLS) and engine:
// a server started with net::server (TLS through server_wrap) and a client stream.
#include "gluon/net/byte_stream.h"

#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "gluon/net/server.h"
#include "gluon/net/tls.h"
#include "gluon/runtime/fd.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sync/semaphore.h"
#include "tls_test_support.h"

namespace gluon::net {
namespace {

using namespace tls_testing;

enum class transport { tcp, unix_socket, tls };

const char* transport_name(transport t) {
    switch (t) {
        case transport::tcp: return "tcp";
        case transport::unix_socket: return "unix";
        case transport::tls: return "tls";
    }
    return "?";
}

class byte_stream_test : public ::testing::TestWithParam<std::tuple<engine::kind, transport>> {
protected:
    void SetUp() override {
        if (!engine::available(kind())) GTEST_SKIP() << engine::kind_name(kind()) << " not available";
        ASSERT_TRUE(init({.engine = kind(), .log_engine = false}));
    }
    void TearDown() override {
        srv_.reset();
        if (is_vcpu()) {
            ASSERT_TRUE(fini());
        }
    }
    engine::kind kind() const { return std::get<0>(GetParam()); }
    transport tp() const { return std::get<1>(GetParam()); }

    // Starts a server whose connections run h, and returns a client connected to it.
    std::unique_ptr<byte_stream> serve(server::handler h) {
        server_options o;
        address where = address::ipv4_loopback(0);
        if (tp() == transport::unix_socket) {
            where = *address::unix_abstract("gluon-bs-" + std::to_string(::getpid()) + "-" +
                                            std::to_string(++counter_));
        }
        if (tp() == transport::tls) o.wrap = tls::server_wrap(server_ctx(), 5s);
        auto s = server::start(where, std::move(h), o);
        EXPECT_TRUE(s) << s.error().message();
        if (!s) return nullptr;
        srv_ = std::move(*s);
        return connect();
    }
    std::unique_ptr<byte_stream> connect() {
        auto sock = stream::connect(srv_->local_address(), 5s);
        EXPECT_TRUE(sock) << sock.error().message();
        if (!sock) return nullptr;
        if (tp() != transport::tls) return std::make_unique<stream>(std::move(*sock));
        auto t = tls::stream::connect(std::move(*sock), client_ctx(), "localhost", 5s);
        EXPECT_TRUE(t) << tls::last_error_message();
        if (!t) return nullptr;
        return std::make_unique<tls::stream>(std::move(*t));
    }

    std::unique_ptr<server> srv_;
    static inline int counter_ = 0;
};

void echo(byte_stream& s) {
    std::vector<char> buf(32 * 1024);
    for (;;) {
        auto n = s.read_some(buf.data(), buf.size(), 10s);
        if (!n || *n == 0) break;
        if (!s.write_all(buf.data(), *n, 10s)) return;
    }
    (void)s.shutdown(1s);
}

std::string pattern(size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(rng());
    return s;
}

TEST_P(byte_stream_test, full_duplex_echo_of_one_mib) {
    auto c = serve(echo);
    ASSERT_TRUE(c);
    const std::string out = pattern(1 << 20, 1);
    auto writer = spawn([&] { EXPECT_TRUE(c->write_all(out.data(), out.size(), 10s)); });
    ASSERT_TRUE(writer);
    std::string in(out.size(), '\0');
    ASSERT_TRUE(c->read_exactly(in.data(), in.size(), 10s));
    ASSERT_TRUE(writer->join());
    EXPECT_TRUE(in == out);
}

TEST_P(byte_stream_test, writev_all_sends_every_piece_in_order) {
    auto c = serve(echo);
    ASSERT_TRUE(c);
    // 150 pieces (more than one internal batch), some empty, some large.
    std::vector<std::string> pieces;
    std::vector<iovec> iov;
    std::string expect;
    for (unsigned i = 0; i < 150; ++i) {
        pieces.push_back(pattern(i % 7 == 0 ? 0 : (i * 997) % 20000, i));
        expect += pieces.back();
    }
    for (auto& p : pieces) iov.push_back({p.data(), p.size()});
    auto writer = spawn([&] {
        EXPECT_TRUE(c->writev_all(iov.data(), static_cast<int>(iov.size()), 10s));
    });
    ASSERT_TRUE(writer);
    std::string in(expect.size(), '\0');
    ASSERT_TRUE(c->read_exactly(in.data(), in.size(), 10s));
    ASSERT_TRUE(writer->join());
    EXPECT_TRUE(in == expect);
}

TEST_P(byte_stream_test, end_of_stream_is_zero_then_enodata) {
    auto c = serve([](byte_stream& s) {
        (void)s.write_all("abc", 3);
        (void)s.shutdown(1s);
    });
    ASSERT_TRUE(c);
    char buf[8];
    EXPECT_EQ(c->read_exactly(buf, 8, 5s).error(), std::errc::no_message_available);
    EXPECT_EQ(c->read_some(buf, 8, 5s).value_or(99), 0u);
    EXPECT_EQ(c->read_exactly(buf, 1, 5s).error(), std::errc::no_message_available);
}

TEST_P(byte_stream_test, a_read_timeout_loses_nothing) {
    gluon::event go;
    auto c = serve([&](byte_stream& s) {
        (void)go.wait(5s);
        (void)s.write_all("late", 4);
        (void)s.shutdown(1s);
    });
    ASSERT_TRUE(c);
    char buf[4];
    EXPECT_EQ(c->read_some(buf, 4, 10ms).error(), std::errc::timed_out);
    go.set();
    ASSERT_TRUE(c->read_exactly(buf, 4, 5s));
    EXPECT_EQ(std::string(buf, 4), "late");
}

TEST_P(byte_stream_test, send_file_sends_the_range_and_reports_a_short_file) {
    char tmpl[] = "/tmp/gluon-bs-file-XXXXXX";
    int fd = ::mkstemp(tmpl);
    ASSERT_GE(fd, 0);
    ::unlink(tmpl);
    const std::string body = pattern(300 * 1000, 7);
    ASSERT_EQ(::write(fd, body.data(), body.size()), static_cast<ssize_t>(body.size()));
    std::error_code past_end;
    auto c = serve([&](byte_stream& s) {
        EXPECT_TRUE(s.send_file(fd, 1000, 200 * 1000, 5s));
        past_end = s.send_file(fd, 299 * 1000, 5000, 5s).error();
        (void)s.shutdown(1s);
    });
    ASSERT_TRUE(c);
    std::string in(200 * 1000 + 1000, '\0');
    ASSERT_TRUE(c->read_exactly(in.data(), in.size(), 10s));  // the range, then the file's tail
    EXPECT_TRUE(in.substr(0, 200 * 1000) == body.substr(1000, 200 * 1000));
    EXPECT_TRUE(in.substr(200 * 1000) == body.substr(299 * 1000));
    char more;
    EXPECT_EQ(c->read_some(&more, 1, 5s).value_or(99), 0u);
    EXPECT_EQ(past_end, std::errc::no_message_available);
    ::close(fd);
}

TEST_P(byte_stream_test, a_write_after_shutdown_fails_with_epipe) {
    auto c = serve(echo);
    ASSERT_TRUE(c);
    ASSERT_TRUE(c->shutdown(1s));
    EXPECT_EQ(c->write_all("x", 1, 1s).error(), std::errc::broken_pipe);
    char buf[1];
    EXPECT_EQ(c->read_some(buf, 1, 5s).value_or(99), 0u) << "the echo server saw our end";
}

TEST_P(byte_stream_test, the_socket_underneath_gives_addresses) {
    auto c = serve(echo);
    ASSERT_TRUE(c);
    ASSERT_NE(c->socket(), nullptr);
    auto peer = c->socket()->peer_address();
    ASSERT_TRUE(peer);
    EXPECT_EQ(peer->to_string(), srv_->local_address().to_string());
    ASSERT_TRUE(c->close());
    char buf[1];
    EXPECT_FALSE(c->read_some(buf, 1, 1s));
}

INSTANTIATE_TEST_SUITE_P(
    all, byte_stream_test,
    ::testing::Combine(::testing::ValuesIn(test::all_engines()),
                       ::testing::Values(transport::tcp, transport::unix_socket, transport::tls)),
    [](const auto& info) {
        return std::string(engine::kind_name(std::get<0>(info.param))) + "_" +
               transport_name(std::get<1>(info.param));
    });

// A TLS listener: a client that is not speaking TLS costs only its own connection.
class tls_wrap_test : public test::engine_test {};
GLUON_ENGINE_TEST_SUITE(tls_wrap_test);

TEST_P(tls_wrap_test, a_failed_handshake_drops_only_that_connection) {
    server_options o;
    o.wrap = tls::server_wrap(server_ctx(), 5s);
    auto srv = server::start(address::ipv4_loopback(0), echo, o);
    ASSERT_TRUE(srv);
    auto junk = stream::connect((*srv)->local_address(), 5s);
    ASSERT_TRUE(junk);
    ASSERT_TRUE(junk->write_all("GET / HTTP/1.1\r\n\r\n", 18));
    char b;
    auto closed = junk->read_some(&b, 1, 5s);  // the server gives up on it: EOF or a reset
    EXPECT_TRUE(!closed || *closed == 0 || *closed == 1);
    auto sock = stream::connect((*srv)->local_address(), 5s);
    ASSERT_TRUE(sock);
    auto t = tls::stream::connect(std::move(*sock), client_ctx(), "localhost", 5s);
    ASSERT_TRUE(t) << tls::last_error_message();
    ASSERT_TRUE(t->write_all("ping", 4));
    char buf[4];
    ASSERT_TRUE(t->read_exactly(buf, 4, 5s));
    EXPECT_EQ(std::string(buf, 4), "ping");
    EXPECT_EQ((*srv)->wrap_failures(), 1u);
    (*srv)->stop(1s);
}

}  // namespace
}  // namespace gluon::net
