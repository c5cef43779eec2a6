// WebSocket interoperability with an independent implementation (Python websockets,
// tests/http/ws_peer.py) in both directions, on every engine: a Python client against a gluon
// server, and the gluon client against a Python server over TCP and TLS.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "gluon/http/websocket.h"
#include "gluon/net/tls.h"
#include "http/websocket_support.h"
#include "net/tls_test_support.h"
#include "support/process.h"

namespace gluon::http {
namespace {

using namespace std::chrono_literals;
using namespace ws_testing;

const std::string k_peer = std::string(GLUON_TESTS_DIR) + "/http/ws_peer.py";

// A Python 3 with the websockets module (Debian's python3-websockets), or "".
const std::string& python() {
    static const std::string found = [] {
        for (std::string p : {std::string("/usr/bin/python3"), test::find_program("python3")}) {
            if (p.empty()) continue;
            test::child c({p, "-c", "import websockets"});
            if (c.started() && c.wait(30s) == 0) return p;
        }
        return std::string();
    }();
    return found;
}

std::string slurp(const std::string& path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

std::string temp_path(const char* stem) {
    return ::testing::TempDir() + stem + std::to_string(::getpid());
}

class http_websocket_peers_test : public ws_fixture {
protected:
    /// Starts the Python server on a listening socket made here (so it is ready before the
    /// child runs: no port race, no waiting); returns its port.
    uint16_t start_python_server(bool tls = false) {
        int fd = ::socket(AF_INET, SOCK_STREAM, 0);  // inherited by the child: no CLOEXEC
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof a;
        EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
        EXPECT_EQ(::listen(fd, 64), 0);
        EXPECT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len), 0);
        std::vector<std::string> args = {python(), k_peer, "server", std::to_string(fd)};
        if (tls) {
            args.push_back(net::tls_testing::certs().dir + "/server.pem");
            args.push_back(net::tls_testing::certs().dir + "/server.key");
        }
        out_ = temp_path("ws_peer_server");
        peer_ = std::make_unique<test::child>(args, "/dev/null", out_);
        ::close(fd);
        EXPECT_TRUE(peer_->started());
        return ntohs(a.sin_port);
    }
    void TearDown() override {
        peer_.reset();
        ws_fixture::TearDown();
    }
    std::unique_ptr<test::child> peer_;
    std::string out_;
};
GLUON_ENGINE_TEST_SUITE(http_websocket_peers_test);

TEST_P(http_websocket_peers_test, python_client_against_gluon_server) {
    GLUON_REQUIRE_PEER(!python().empty(), "no python3 with the websockets module (python3-websockets)");
    // The gluon server closes "/close-me" connections at once with 4000 "gluon-bye".
    auto s = server::start(net::address::ipv4_loopback(0), [this](request& req, response& res) {
        auto w = websocket::accept(req, res, opts_);
        if (!w) return;
        if (req.path() == "/close-me") {
            (void)w->close(4000, "gluon-bye", 5s);
            return;
        }
        websocket::message m;
        for (;;) {
            auto r = w->recv(m);
            if (!r) {
                (void)results_.try_send({r.error().value(), w->close_status(), std::string(w->close_reason())});
                return;
            }
            if (!(m.is_text() ? w->send_text(m.data, 5s) : w->send_binary(m.data, 5s))) return;
        }
    });
    ASSERT_TRUE(s);
    srv_ = std::move(*s);
    std::string out = temp_path("ws_peer_client");
    test::child c({python(), k_peer, "client", "ws://127.0.0.1:" + std::to_string(srv_->local_address().port())},
                  "/dev/null", out);
    ASSERT_TRUE(c.started());
    EXPECT_EQ(c.wait(60s), 0) << slurp(out) << slurp(out + ".err");
    auto first = server_result();  // the echo connection: Python closed with 1001
    EXPECT_EQ(first.err, ENODATA);
    EXPECT_EQ(first.code, 1001);
    EXPECT_EQ(first.reason, "py going away");
    auto bad = server_result();  // the bad UTF-8 connection
    EXPECT_EQ(bad.err, EILSEQ);
}

TEST_P(http_websocket_peers_test, gluon_client_against_python_server) {
    GLUON_REQUIRE_PEER(!python().empty(), "no python3 with the websockets module (python3-websockets)");
    std::string base = "ws://127.0.0.1:" + std::to_string(start_python_server());
    websocket_options o;
    o.connect_timeout = 30s;  // the interpreter may still be starting
    {
        auto c = websocket::connect(base + "/echo", o);
        ASSERT_TRUE(c) << c.error().message() << slurp(out_ + ".err");
        ASSERT_TRUE(c->send_text("hi python", 5s));
        auto m = c->recv(5s);
        ASSERT_TRUE(m) << m.error().message();
        EXPECT_EQ(m->data, "hi python");
        std::string big(2 << 20, 'z');
        ASSERT_TRUE(c->send_binary(big, 10s));
        m = c->recv(10s);
        ASSERT_TRUE(m);
        EXPECT_EQ(m->data.size(), big.size());
        ASSERT_TRUE(c->send_fragment(websocket::kind::text, "a", true, false, 5s));
        ASSERT_TRUE(c->ping("x", 5s));
        ASSERT_TRUE(c->send_fragment(websocket::kind::text, "b", false, true, 5s));
        m = c->recv(5s);
        ASSERT_TRUE(m);
        EXPECT_EQ(m->data, "ab");
        ASSERT_TRUE(c->close(3000, "gluon done", 5s));
        EXPECT_EQ(c->close_status(), 3000);
    }
    {
        auto c = websocket::connect(base + "/fragments", o);
        ASSERT_TRUE(c);
        auto m = c->recv(5s);
        ASSERT_TRUE(m);
        EXPECT_TRUE(m->is_text());
        EXPECT_EQ(m->data, "fragmented \xe2\x82\xac");
    }
    {
        auto c = websocket::connect(base + "/ping", o);
        ASSERT_TRUE(c);
        auto m = c->recv(5s);  // answering the ping on the way
        ASSERT_TRUE(m);
        EXPECT_EQ(m->data, "pong received");
    }
    {
        auto c = websocket::connect(base + "/close", o);
        ASSERT_TRUE(c);
        auto m = c->recv(5s);
        ASSERT_FALSE(m);
        EXPECT_EQ(m.error(), std::errc::no_message_available);
        EXPECT_EQ(c->close_status(), 4001);
        EXPECT_EQ(c->close_reason(), "py-bye");
    }
    {
        auto c = websocket::connect(base + "/badutf8", o);
        ASSERT_TRUE(c);
        auto m = c->recv(5s);
        ASSERT_FALSE(m);
        EXPECT_EQ(m.error(), std::errc::illegal_byte_sequence);
    }
    auto r = websocket::connect(base + "/report", o);
    ASSERT_TRUE(r);
    auto m = r->recv(10s);
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_EQ(m->data, "badutf8 close 1007");
}

TEST_P(http_websocket_peers_test, gluon_client_over_tls) {
    GLUON_REQUIRE_PEER(!python().empty(), "no python3 with the websockets module (python3-websockets)");
    uint16_t port = start_python_server(true);
    auto ctx = net::tls_testing::client_ctx();
    websocket_options o;
    o.connect_timeout = 30s;
    o.tls = &ctx;
    auto c = websocket::connect("wss://localhost:" + std::to_string(port) + "/echo", o);
    ASSERT_TRUE(c) << c.error().message() << slurp(out_ + ".err");
    ASSERT_TRUE(c->send_text("over tls", 5s));
    auto m = c->recv(5s);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->data, "over tls");
    EXPECT_TRUE(c->close(close_code::normal, {}, 5s));
}

TEST_P(http_websocket_peers_test, gluon_server_and_client_over_tls) {
    auto sctx = net::tls_testing::server_ctx();
    server_options so;
    so.wrap = net::tls::server_wrap(sctx, 5s);
    auto s = server::start(net::address::ipv4_loopback(0), [](request& req, response& res) {
        auto w = websocket::accept(req, res);
        if (!w) return;
        websocket::message m;
        while (w->recv(m))
            if (!w->send_text("tls:" + m.data, 5s)) return;
    }, so);
    ASSERT_TRUE(s);
    auto cctx = net::tls_testing::client_ctx();
    websocket_options o;
    o.tls = &cctx;
    auto c = websocket::connect("wss://localhost:" + std::to_string((*s)->local_address().port()) + "/", o);
    ASSERT_TRUE(c) << c.error().message();
    ASSERT_TRUE(c->send_text("hello", 5s));
    auto m = c->recv(5s);
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_EQ(m->data, "tls:hello");
    EXPECT_TRUE(c->close(close_code::normal, {}, 5s));
    EXPECT_EQ(c->close_status(), close_code::normal);
}

}  // namespace
}  // namespace gluon::http
