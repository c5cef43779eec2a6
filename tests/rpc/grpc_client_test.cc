// gluon's gRPC client calling gRPC C++'s server (tests/rpc/grpc_cpp_peer.cc), and gluon's own
// server in clear text and over TLS (h2 by ALPN): every call kind, metadata both ways, an error
// status with a message to percent-decode, a deadline that expires, a cancelled call, unknown
// methods, a server that is not there, answers that are not gRPC, a deadline that passes
// while another call connects and calls in flight across a GOAWAY, on every engine.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <nghttp2/nghttp2.h>
#include <poll.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "echo_service.h"
#include "gluon/http/server.h"
#include "gluon/net/tls.h"
#include "gluon/rpc/grpc.h"
#include "gluon/runtime/fiber.h"
#include "net/tls_test_support.h"
#include "support/process.h"
#include "test_support.h"

namespace gluon::rpc::grpc {
namespace {

using namespace std::chrono_literals;
using gluon::test::Msg;

/// The calls every server must answer the same way: gRPC C++'s, and gluon's.
void call_every_kind(channel& ch) {
    {
        call_options o;
        o.metadata = {{"x-in", "meta-value"}};
        client_call c = ch.call("/gluon.test.Echo/Unary", o);
        Msg req, resp;
        req.set_text("hello");
        req.set_blob(std::string(100000, 'b'));
        ASSERT_TRUE(write(c, req));
        ASSERT_TRUE(c.writes_done());
        ASSERT_TRUE(read(c, resp));
        EXPECT_EQ(resp.text(), "hello");
        EXPECT_EQ(resp.blob(), req.blob());
        EXPECT_FALSE(read(c, resp));
        status s = c.finish();
        EXPECT_TRUE(s.ok()) << code_name(s.code) << " " << s.message;
        EXPECT_EQ(c.trailing_metadata("x-out"), "meta-value");
    }
    {
        Msg req, resp;
        req.set_text("typed");
        status s = unary(ch, "/gluon.test.Echo/Unary", req, resp);
        EXPECT_TRUE(s.ok()) << s.message;
        EXPECT_EQ(resp.text(), "typed");
    }
    {
        Msg req, m;
        req.set_n(5);
        client_call c = ch.call("/gluon.test.Echo/ServerStream");
        ASSERT_TRUE(write(c, req));
        int k = 0;
        while (read(c, m)) EXPECT_EQ(m.n(), k++);
        EXPECT_EQ(k, 5);
        EXPECT_TRUE(c.finish().ok());
    }
    {
        client_call c = ch.call("/gluon.test.Echo/ClientStream");
        for (const char* t : {"a", "b", "c"}) {
            Msg m;
            m.set_text(t);
            ASSERT_TRUE(write(c, m));
        }
        ASSERT_TRUE(c.writes_done());
        Msg resp;
        ASSERT_TRUE(read(c, resp));
        EXPECT_EQ(resp.text(), "abc");
        EXPECT_EQ(resp.n(), 3);
        EXPECT_TRUE(c.finish().ok());
    }
    {
        // Each answer read before the next request is written: the server streams as it goes.
        client_call c = ch.call("/gluon.test.Echo/Bidi");
        for (int i = 0; i < 10; ++i) {
            Msg m, back;
            m.set_n(i);
            m.set_blob(std::string(i * 10000, 'x'));
            ASSERT_TRUE(write(c, m));
            ASSERT_TRUE(read(c, back));
            EXPECT_EQ(back.n(), i);
            EXPECT_EQ(back.blob().size(), m.blob().size());
        }
        ASSERT_TRUE(c.writes_done());
        Msg extra;
        EXPECT_FALSE(read(c, extra));
        EXPECT_TRUE(c.finish().ok());
    }
    {
        Msg req, resp;
        req.set_n(static_cast<int>(code::not_found));
        req.set_text("no such thing: \xc3\xbc 100%");
        status s = unary(ch, "/gluon.test.Echo/Fail", req, resp);
        EXPECT_EQ(s.code, code::not_found);
        EXPECT_EQ(s.message, req.text());
    }
    {
        // The first message says the server has the call; then only the deadline ends it.
        call_options o;
        o.deadline = deadline_after(1s);  // room for the first message on a loaded machine
        client_call c = ch.call("/gluon.test.Echo/Slow", o);
        Msg req, m;
        ASSERT_TRUE(write(c, req));
        ASSERT_TRUE(c.writes_done());
        EXPECT_TRUE(read(c, m));
        EXPECT_FALSE(read(c, m));
        EXPECT_EQ(c.finish().code, code::deadline_exceeded);  // the server's status or our own
    }
    {
        client_call c = ch.call("/gluon.test.Echo/Slow");
        Msg req, m;
        ASSERT_TRUE(write(c, req));
        EXPECT_TRUE(read(c, m));
        c.cancel();
        EXPECT_FALSE(read(c, m));
        EXPECT_EQ(c.finish().code, code::cancelled);
    }
    {
        std::string out;
        status s = ch.unary("/gluon.test.Echo/NoSuchMethod", "", out);
        EXPECT_EQ(s.code, code::unimplemented) << code_name(s.code) << " " << s.message;
    }
    {
        // The connection carries on after all of that.
        Msg req, resp;
        req.set_text("still here");
        EXPECT_TRUE(unary(ch, "/gluon.test.Echo/Unary", req, resp).ok());
        EXPECT_EQ(resp.text(), "still here");
    }
}

class grpc_client_test : public test::engine_test {
protected:
    void TearDown() override {
        srv_.reset();
        peer_.reset();
        test::engine_test::TearDown();
    }
    /// Starts gRPC C++'s Echo server; returns its port (0 on failure).
    uint16_t start_cpp_server() {
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) return 0;
        ::fcntl(fds[1], F_SETFD, 0);  // the child inherits the write end
        std::string out = net::tls_testing::certs().dir + "/grpc-server-" + engine::kind_name(GetParam());
        peer_ = std::make_unique<test::child>(std::vector<std::string>{GLUON_GRPC_PEER, "server", std::to_string(fds[1])},
                                              "/dev/null", out);
        ::close(fds[1]);
        char buf[16] = {};
        ssize_t n = ::read(fds[0], buf, sizeof buf - 1);  // blocks until it listens (or exits: 0)
        ::close(fds[0]);
        return n > 0 ? static_cast<uint16_t>(std::atoi(buf)) : 0;
    }
    uint16_t start_gluon_server(const net::tls::context* tls) {
        testing::add_echo_service(g_, slow_);
        http::server_options o;
        if (tls) o.wrap = net::tls::server_wrap(*tls, 10s);
        auto s = http::server::start(net::address::ipv4_loopback(0), g_.as_handler(), o);
        EXPECT_TRUE(s) << s.error().message();
        srv_ = std::move(*s);
        return srv_->local_address().port();
    }
    std::unique_ptr<test::child> peer_;
    server g_;
    testing::slow_counts slow_;
    std::unique_ptr<http::server> srv_;
};

TEST_P(grpc_client_test, calls_grpc_cpp_server) {
    uint16_t port = start_cpp_server();
    ASSERT_NE(port, 0) << "the gRPC C++ peer did not start";
    channel ch("127.0.0.1", port);
    call_every_kind(ch);
}

TEST_P(grpc_client_test, calls_gluon_server_in_clear_text) {
    channel ch("127.0.0.1", start_gluon_server(nullptr));
    call_every_kind(ch);
    slow_.await(2);
    EXPECT_EQ(slow_.expired, 1);
    EXPECT_EQ(slow_.cancelled, 1);
}

// gRPC's length prefix is 32 bits: a request message of 4 GiB or more went out with its length
// modulo 2^32 and the rest of its bytes as garbage. One over 2 GiB ends the call with
// RESOURCE_EXHAUSTED before any of it is read (the message here is an unbacked mapping) or sent,
// and the channel goes on serving.
TEST_P(grpc_client_test, a_request_message_over_2_gib_is_refused_not_truncated) {
    const size_t n = k_max_message + 1;
    void* p = ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) GTEST_SKIP() << "no room for a 2 GiB mapping";
    channel ch("127.0.0.1", start_gluon_server(nullptr));
    client_call c = ch.call("/gluon.test.Echo/ClientStream");
    EXPECT_FALSE(c.write(std::string_view(static_cast<const char*>(p), n)));
    status s = c.finish();
    EXPECT_EQ(s.code, code::resource_exhausted) << code_name(s.code) << " " << s.message;
    ::munmap(p, n);
    Msg req, resp;
    req.set_text("after");
    EXPECT_TRUE(unary(ch, "/gluon.test.Echo/Unary", req, resp).ok());
    EXPECT_EQ(resp.text(), "after");
}

TEST_P(grpc_client_test, calls_gluon_server_over_tls_by_alpn) {
    net::tls::context_options so, co;
    so.alpn = co.alpn = {"h2"};
    auto sctx = net::tls_testing::server_ctx(so);
    auto cctx = net::tls_testing::client_ctx(co);
    channel_options o;
    o.tls = &cctx;
    o.authority = "localhost";
    channel ch("127.0.0.1", start_gluon_server(&sctx), o);
    call_every_kind(ch);
}

TEST_P(grpc_client_test, a_server_that_is_not_there_is_unavailable) {
    test::refusing_port nobody;
    channel ch("127.0.0.1", nobody.port());
    std::string out;
    status s = ch.unary("/gluon.test.Echo/Unary", "", out);
    EXPECT_EQ(s.code, code::unavailable) << s.message;
}

TEST_P(grpc_client_test, a_server_that_is_not_grpc_maps_its_http_status) {
    auto s = http::server::start(net::address::ipv4_loopback(0),
                                 [](http::request&, http::response& res) { res.status(404); });
    ASSERT_TRUE(s);
    channel ch("127.0.0.1", (*s)->local_address().port());
    std::string out;
    status st = ch.unary("/gluon.test.Echo/Unary", "", out);
    EXPECT_EQ(st.code, code::unimplemented) << st.message;
}

TEST_P(grpc_client_test, an_answer_with_a_body_that_is_not_grpc_maps_its_head) {
    // What a proxy or load balancer in front of a gRPC server sends: error pages with a body.
    // Their bytes are not gRPC messages; the code comes from the head alone.
    auto s = http::server::start(net::address::ipv4_loopback(0), [](http::request& req, http::response& res) {
        std::string_view p = req.path();
        if (p == "/t.S/Busy") {
            res.status(503);
            res.body("Service Unavailable\n");
        } else if (p == "/t.S/Login") {
            res.status(401);
            res.body("log in first\n");
        } else if (p == "/t.S/Page") {
            res.content_type("text/html");
            res.body("<html>not gRPC</html>\n");
        } else if (p == "/t.S/TrailersOnly") {
            // A gRPC status in the head wins over the HTTP status it came with.
            res.status(429);
            res.content_type("application/grpc");
            res.header("grpc-status", "8");
            res.header("grpc-message", "slow down");
            res.body("Too Many Requests\n");
        }
    });
    ASSERT_TRUE(s);
    channel ch("127.0.0.1", (*s)->local_address().port());
    auto call = [&](std::string_view method) {
        std::string out;
        return ch.unary(method, "request", out);
    };
    status st = call("/t.S/Busy");
    EXPECT_EQ(st.code, code::unavailable) << code_name(st.code) << " " << st.message;
    st = call("/t.S/Login");
    EXPECT_EQ(st.code, code::unauthenticated) << code_name(st.code) << " " << st.message;
    st = call("/t.S/Page");
    EXPECT_EQ(st.code, code::unknown) << code_name(st.code) << " " << st.message;
    st = call("/t.S/TrailersOnly");
    EXPECT_EQ(st.code, code::resource_exhausted) << code_name(st.code) << " " << st.message;
    EXPECT_EQ(st.message, "slow down");
    // A streaming call learns it at its first read, without half-closing first.
    client_call c = ch.call("/t.S/Busy");
    (void)c.write("request");  // the answer may have closed the stream already
    std::string m;
    EXPECT_FALSE(c.read(m));
    EXPECT_EQ(c.finish().code, code::unavailable);
}

TEST_P(grpc_client_test, a_call_waiting_for_another_fibers_connect_keeps_its_deadline) {
    // A listener that never accepts: the kernel completes TCP connections, and nobody ever
    // answers the TLS handshake, so the first call's connect lasts its connect_timeout.
    test::silent_listener listener;
    ASSERT_NE(listener.port(), 0);
    net::tls::context_options co;
    co.alpn = {"h2"};
    auto cctx = net::tls_testing::client_ctx(co);
    channel_options o;
    o.tls = &cctx;
    o.authority = "localhost";
    o.connect_timeout = 3s;
    channel ch("127.0.0.1", listener.port(), o);
    status first;
    auto f = spawn([&] {
        std::string out;
        first = ch.unary("/gluon.test.Echo/Unary", "", out);
    });
    ASSERT_TRUE(f);
    ASSERT_TRUE(this_fiber::sleep_for(100ms));  // the first call is connecting
    call_options c;
    c.deadline = deadline_after(200ms);
    int64_t start = mono_now_ns();
    std::string out;
    status s = ch.unary("/gluon.test.Echo/Unary", "", out, c);
    auto took = std::chrono::nanoseconds(mono_now_ns() - start);
    EXPECT_EQ(s.code, code::deadline_exceeded) << code_name(s.code) << " " << s.message;
    EXPECT_LT(took, 2s);  // not the first call's connect_timeout
    ASSERT_TRUE(f->join());
    EXPECT_EQ(first.code, code::unavailable) << code_name(first.code) << " " << first.message;
}

TEST_P(grpc_client_test, a_call_interrupted_while_waiting_for_another_fibers_connect_is_cancelled) {
    // A listener that never accepts: the first call's TLS handshake is never answered, so it
    // holds the connect while the second call waits for it.
    test::silent_listener listener;
    ASSERT_NE(listener.port(), 0);
    net::tls::context_options co;
    co.alpn = {"h2"};
    auto cctx = net::tls_testing::client_ctx(co);
    channel_options o;
    o.tls = &cctx;
    o.authority = "localhost";
    o.connect_timeout = 30s;
    channel ch("127.0.0.1", listener.port(), o);
    status first, second;
    auto f = spawn([&] {
        std::string out;
        first = ch.unary("/gluon.test.Echo/Unary", "", out);
    });
    ASSERT_TRUE(f);
    // The first call's TCP connection is in the accept queue: it holds the connect now.
    deadline_t until = deadline_after(10s);
    pollfd p{listener.fd(), POLLIN, 0};
    while (::poll(&p, 1, 0) == 0 && mono_now_ns() < until) ASSERT_TRUE(this_fiber::sleep_for(1ms));
    ASSERT_EQ(p.revents & POLLIN, POLLIN);
    auto g = spawn([&] {
        std::string out;
        second = ch.unary("/gluon.test.Echo/Unary", "", out);
    });
    ASSERT_TRUE(g);
    // Whether it is parked on the connect already or not: its wait ends with ECANCELED.
    ASSERT_TRUE(g->interrupt());
    ASSERT_TRUE(g->join());
    EXPECT_EQ(second.code, code::cancelled) << code_name(second.code) << " " << second.message;
    ASSERT_TRUE(f->interrupt());  // the first call is not left to its connect_timeout
    ASSERT_TRUE(f->join());
    EXPECT_NE(first.code, code::ok);
}

/// A server written with nghttp2 on a plain thread, for what gluon's server does not do: it
/// answers the first call only after telling the client GOAWAY (last stream: that call) and
/// after `answer` is set, and accepts no other connection.
struct goaway_server {
    test::bound_port listener{16};
    int cfd = -1;
    uint16_t port = 0;
    std::atomic<bool> goaway_seen{false}, answer{false};
    bool request_done = false;
    std::thread t;

    goaway_server() {
        EXPECT_NE(listener.port(), 0);
        port = listener.port();
        t = std::thread([this] { serve(); });
    }
    ~goaway_server() {
        answer = true;
        ::shutdown(listener.fd(), SHUT_RDWR);  // an accept still waiting returns
        t.join();
    }

    static ssize_t on_send(nghttp2_session*, const uint8_t* d, size_t n, int, void* u) {
        ssize_t r = ::send(static_cast<goaway_server*>(u)->cfd, d, n, MSG_NOSIGNAL);
        return r < 0 ? ssize_t{NGHTTP2_ERR_CALLBACK_FAILURE} : r;
    }
    static int on_frame(nghttp2_session*, const nghttp2_frame* f, void* u) {
        auto* self = static_cast<goaway_server*>(u);
        if (f->hd.stream_id == 1 && (f->hd.flags & NGHTTP2_FLAG_END_STREAM)) self->request_done = true;
        // The client answers the PING sent after the GOAWAY once it has read the GOAWAY.
        if (f->hd.type == NGHTTP2_PING && (f->hd.flags & NGHTTP2_FLAG_ACK)) self->goaway_seen = true;
        return 0;
    }
    static ssize_t body(nghttp2_session* s, int32_t id, uint8_t* buf, size_t, uint32_t* flags, nghttp2_data_source*,
                        void*) {
        std::memset(buf, 0, 5);  // one empty message, then the status in trailers
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        nghttp2_nv t[] = {{(uint8_t*)"grpc-status", (uint8_t*)"0", 11, 1, NGHTTP2_NV_FLAG_NONE}};
        nghttp2_submit_trailer(s, id, t, 1);
        return 5;
    }
    void serve() {
        cfd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
        if (cfd < 0) return;
        nghttp2_session_callbacks* cb;
        nghttp2_session_callbacks_new(&cb);
        nghttp2_session_callbacks_set_send_callback(cb, on_send);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
        nghttp2_session* s;
        nghttp2_session_server_new(&s, cb, this);
        nghttp2_session_callbacks_del(cb);
        nghttp2_submit_settings(s, NGHTTP2_FLAG_NONE, nullptr, 0);
        bool goaway = false, answered = false;
        const int64_t until = deadline_after(20s);
        while (mono_now_ns() < until) {
            if (request_done && !goaway) {
                nghttp2_submit_goaway(s, NGHTTP2_FLAG_NONE, 1, NGHTTP2_NO_ERROR, nullptr, 0);
                nghttp2_submit_ping(s, NGHTTP2_FLAG_NONE, nullptr);
                goaway = true;
            }
            if (goaway && answer && !answered) {
                nghttp2_nv h[] = {
                    {(uint8_t*)":status", (uint8_t*)"200", 7, 3, NGHTTP2_NV_FLAG_NONE},
                    {(uint8_t*)"content-type", (uint8_t*)"application/grpc", 12, 16, NGHTTP2_NV_FLAG_NONE}};
                nghttp2_data_provider dp{};
                dp.read_callback = body;
                nghttp2_submit_response(s, 1, h, 2, &dp);
                answered = true;
            }
            if (nghttp2_session_send(s) != 0) break;
            if (!nghttp2_session_want_read(s) && !nghttp2_session_want_write(s)) break;
            pollfd p{cfd, POLLIN, 0};
            if (::poll(&p, 1, 10) <= 0) continue;  // 10 ms: to look at `answer` again
            uint8_t buf[16384];
            ssize_t n = ::read(cfd, buf, sizeof buf);
            if (n <= 0 || nghttp2_session_mem_recv(s, buf, static_cast<size_t>(n)) < 0) break;
        }
        nghttp2_session_del(s);
        ::close(cfd);
    }
};

TEST_P(grpc_client_test, a_goaway_lets_the_calls_it_announced_finish) {
    // After a GOAWAY the server still answers the streams up to the last one it announced
    // (RFC 9113 6.8: graceful shutdown, connection ageing). A call started meanwhile goes to a
    // new connection, and must not close the old one under the calls still waiting on it.
    goaway_server srv;
    channel_options o;
    o.connect_timeout = 2s;
    channel ch("127.0.0.1", srv.port, o);
    status first;
    fiber f = *spawn([&] {
        std::string out;
        first = ch.unary("/t.S/M", "one", out);
    });
    deadline_t until = deadline_after(10s);
    while (!srv.goaway_seen && mono_now_ns() < until) (void)this_fiber::sleep_for(1ms);
    ASSERT_TRUE(srv.goaway_seen);
    call_options c;
    c.deadline = deadline_after(200ms);  // the server takes no new connection
    std::string out;
    status second = ch.unary("/t.S/M", "two", out, c);
    EXPECT_FALSE(second.ok());
    srv.answer = true;
    ASSERT_TRUE(f.join());
    EXPECT_TRUE(first.ok()) << code_name(first.code) << " " << first.message;
}

TEST_P(grpc_client_test, many_fibers_share_one_connection) {
    channel ch("127.0.0.1", start_gluon_server(nullptr));
    constexpr int k = 50;
    int ok = 0;
    std::vector<fiber> fs;
    for (int i = 0; i < k; ++i)
        fs.push_back(*spawn([&, i] {
            Msg req, resp;
            req.set_n(i);
            req.set_text(std::string(i * 100, 'q'));
            if (unary(ch, "/gluon.test.Echo/Unary", req, resp).ok() && resp.n() == i && resp.text() == req.text()) ++ok;
        }));
    for (auto& f : fs) ASSERT_TRUE(f.join());
    EXPECT_EQ(ok, k);
    EXPECT_EQ(srv_->connections(), 1u);  // every call a stream of this vCPU's one connection
}

// A channel keeps a connection per vCPU; closing it (here, destroying it) ends them all, each on
// its own vCPU. Only the calling vCPU's was closed: the others stayed open, with their fibers
// and buffers, until the server closed them.
TEST_P(grpc_client_test, closing_a_channel_ends_its_connections_on_every_vcpu) {
    const uint16_t port = start_gluon_server(nullptr);
    auto rt = runtime::start(test::test_runtime(1, GetParam()));
    ASSERT_TRUE(rt) << rt.error().message();
    auto ch = std::make_unique<channel>("127.0.0.1", port);
    auto call = [&] {
        Msg req, resp;
        req.set_text("hi");
        return unary(*ch, "/gluon.test.Echo/Unary", req, resp).ok() && resp.text() == "hi";
    };
    EXPECT_TRUE(call());  // this vCPU's connection
    auto other = (*rt)->call(0, call);  // the other vCPU's
    ASSERT_TRUE(other);
    EXPECT_TRUE(*other);
    EXPECT_EQ(srv_->connections(), 2u);
    ch.reset();
    EXPECT_TRUE(test::eventually([&] { return srv_->connections() == 0; })) << srv_->connections();
}

GLUON_ENGINE_TEST_SUITE(grpc_client_test);

}  // namespace
}  // namespace gluon::rpc::grpc
