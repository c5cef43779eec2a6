// The HTTP/1.1 server on every engine, driven by raw sockets so that every byte on the wire is
// the test's own.
#include "gluon/http/server.h"

#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>
#include <netinet/in.h>
#include <linux/tcp.h>  // tcp_info with tcpi_data_segs_in (glibc's is older)
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gluon/common/log.h"
#include "gluon/http/router.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sync/semaphore.h"
#include "http/client_support.h"
#include "http/corpus.h"
#include "test_support.h"

namespace gluon::http {
namespace {

using namespace std::chrono_literals;

class http_server_test : public test::engine_test {
protected:
    void TearDown() override {
        srv_.reset();
        test::engine_test::TearDown();
    }
    void start(handler h, server_options o = {}) {
        auto s = server::start(net::address::ipv4_loopback(0), std::move(h), std::move(o));
        ASSERT_TRUE(s) << s.error().message();
        srv_ = std::move(*s);
    }
    net::stream connect() {
        auto c = net::stream::connect(srv_->local_address(), 5s);
        EXPECT_TRUE(c) << c.error().message();
        return std::move(*c);
    }
    static router test_router() {
        router r;
        r.get("/", [](request&, response& res) { res.body("home"); });
        r.get("/path", [](request& req, response& res) { res.body(std::string(req.target())); });
        r.post("/echo", [](request& req, response& res) {
            auto b = req.body();
            if (!b) return;  // the server answers the body's error
            res.body(*b);
        });
        r.get("/users/:id/books/:book", [](request& req, response& res) {
            res.body(std::string(req.param("id")) + "," + std::string(req.param("book")));
        });
        r.get("/files/*", [](request& req, response& res) { res.body(std::string(req.param("*"))); });
        r.get("/stream", [](request&, response& res) {
            for (int i = 0; i < 3; ++i) ASSERT_TRUE(res.write("part" + std::to_string(i) + ";"));
        });
        r.get("/throw", [](request&, response&) -> void { throw std::runtime_error("boom"); });
        r.get("/inject", [](request&, response& res) {
            res.header("X-Bad", "a\r\nSet-Cookie: evil=1");
            res.header("X-Good", "fine");
            res.body("ok");
        });
        return r;
    }
    std::unique_ptr<server> srv_;
};

TEST_P(http_server_test, serves_requests_on_a_kept_alive_connection) {
    start(test_router().as_handler());
    auto c = connect();
    for (int i = 0; i < 3; ++i) {
        auto r = roundtrip(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 200);
        EXPECT_EQ(r->body, "home");
        EXPECT_TRUE(r->keep_alive);
        EXPECT_NE(r->head.find("\r\nDate: "), std::string::npos);
        EXPECT_NE(r->head.find("\r\nServer: gluon\r\n"), std::string::npos);
    }
    EXPECT_EQ(srv_->connections(), 1u);
}

// n GET requests for /path?n=0 .. n-1, for one write.
std::string pipelined_batch(int n) {
    std::string batch;
    for (int i = 0; i < n; ++i) batch += "GET /path?n=" + std::to_string(i) + " HTTP/1.1\r\nHost: t\r\n\r\n";
    return batch;
}

TEST_P(http_server_test, answers_pipelined_requests_in_order) {
    start(test_router().as_handler());
    auto c = connect();
    const std::string batch = pipelined_batch(16);
    ASSERT_TRUE(c.write_all(batch.data(), batch.size(), 5s));
    std::string buf;
    for (int i = 0; i < 16; ++i) {
        auto r = read_reply(c, buf);
        ASSERT_TRUE(r) << i;
        EXPECT_EQ(r->body, "/path?n=" + std::to_string(i));
    }
}

// The answers to a batch that arrived in one read leave in one send: the client's side of the
// connection counts the segments that carried data (each send of fewer bytes than the loopback
// MSS is one segment; sixteen sends would be at least two, even with Nagle's coalescing).
TEST_P(http_server_test, answers_a_pipelined_batch_with_one_send) {
    start(test_router().as_handler());
    auto c = connect();
    const std::string batch = pipelined_batch(16);
    ASSERT_TRUE(c.write_all(batch.data(), batch.size(), 5s));
    std::string buf;
    size_t bytes = 0;
    for (int i = 0; i < 16; ++i) {
        auto r = read_reply(c, buf);
        ASSERT_TRUE(r) << i;
        EXPECT_EQ(r->body, "/path?n=" + std::to_string(i));
        bytes += r->head.size() + r->body.size();
    }
    ASSERT_LT(bytes, 16000u);
    tcp_info ti{};
    socklen_t len = sizeof ti;
    ASSERT_EQ(getsockopt(c.get(), IPPROTO_TCP, TCP_INFO, &ti, &len), 0);
    EXPECT_EQ(ti.tcpi_data_segs_in, 1u) << "the 16 answers arrived in " << ti.tcpi_data_segs_in << " segments";
}

TEST_P(http_server_test, routes_by_method_exact_parameter_and_prefix) {
    start(test_router().as_handler());
    auto c = connect();
    auto r = roundtrip(c, "GET /users/7/books/42 HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "7,42");
    r = roundtrip(c, "GET /files/a/b.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    EXPECT_EQ(r->body, "a/b.txt");
    r = roundtrip(c, "GET /nowhere HTTP/1.1\r\nHost: t\r\n\r\n");
    EXPECT_EQ(r->status, 404);
    r = roundtrip(c, "DELETE /echo HTTP/1.1\r\nHost: t\r\n\r\n");
    EXPECT_EQ(r->status, 405);
    EXPECT_NE(r->head.find("\r\nAllow: POST\r\n"), std::string::npos) << r->head;
    r = roundtrip(c, "HEAD / HTTP/1.1\r\nHost: t\r\n\r\n", method::head);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "");
    EXPECT_NE(r->head.find("Content-Length: 4\r\n"), std::string::npos);
    // The connection still serves after all of these.
    r = roundtrip(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    EXPECT_EQ(r->body, "home");
}

// "OPTIONS *" asks about the server, not a resource: the router answers it with every method
// its routes accept, without content, and no route sees it (not even a prefix route for all
// paths under OPTIONS).
TEST_P(http_server_test, options_asterisk_is_answered_with_the_methods_of_all_routes) {
    router r = test_router();
    r.del("/users/:id", [](request&, response& res) { res.body("deleted"); });
    ASSERT_TRUE(r.add(method::options, "/*", [](request&, response& res) { res.body("routed"); }));
    start(r.as_handler());
    auto c = connect();
    auto rep = roundtrip(c, "OPTIONS * HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(rep);
    EXPECT_EQ(rep->status, 200) << rep->head;
    EXPECT_EQ(field(rep->head, "Allow"), "GET, HEAD, POST, DELETE, OPTIONS") << rep->head;
    EXPECT_EQ(field(rep->head, "Content-Length"), "0") << rep->head;
    EXPECT_EQ(field(rep->head, "Content-Type"), "") << rep->head;
    EXPECT_EQ(rep->body, "");
    EXPECT_TRUE(rep->keep_alive);
    // A path is still routed as before.
    rep = roundtrip(c, "OPTIONS /anything HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(rep);
    EXPECT_EQ(rep->body, "routed");
}

TEST_P(http_server_test, router_rejects_malformed_patterns) {
    router r;
    EXPECT_FALSE(r.add(method::get, "no-slash", [](request&, response&) {}));
    EXPECT_FALSE(r.add(method::get, "/a/*/b", [](request&, response&) {}));
    EXPECT_FALSE(r.add(method::get, "/a/:", [](request&, response&) {}));
    EXPECT_TRUE(r.add(method::get, "/a", [](request&, response&) {}));
    EXPECT_EQ(r.add(method::get, "/a", [](request&, response&) {}).error(), std::errc::file_exists);
}

TEST_P(http_server_test, reads_length_and_chunked_bodies) {
    start(test_router().as_handler());
    auto c = connect();
    auto r = roundtrip(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\nhello world");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "hello world");
    r = roundtrip(c, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
                    "6\r\nhello \r\n5;ext=1\r\nworld\r\n0\r\nTrailer: x\r\n\r\n");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "hello world");
    // A large chunked body, in many chunks, larger than the receive buffer.
    std::string big(300 * 1000, 'x');
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>('a' + i % 26);
    std::string req = "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (size_t i = 0; i < big.size(); i += 7000) {
        std::string part = big.substr(i, 7000);
        char hex[16];
        snprintf(hex, sizeof hex, "%zx\r\n", part.size());
        req += hex + part + "\r\n";
    }
    req += "0\r\n\r\n";
    r = roundtrip(c, req);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, big);
}

TEST_P(http_server_test, an_unread_body_is_drained_and_the_connection_kept) {
    start(test_router().as_handler());
    auto c = connect();
    auto r = roundtrip(c, "GET / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nabcde");
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->keep_alive);
    r = roundtrip(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "home");
}

TEST_P(http_server_test, answers_expect_100_continue_before_reading_the_body) {
    start(test_router().as_handler());
    auto c = connect();
    std::string head = "POST /echo HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n";
    ASSERT_TRUE(c.write_all(head.data(), head.size(), 5s));
    char buf[64];
    auto n = c.read_some(buf, sizeof buf, 5s);
    ASSERT_TRUE(n);
    EXPECT_EQ(std::string(buf, *n), "HTTP/1.1 100 Continue\r\n\r\n");
    auto r = roundtrip(c, "body");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "body");
}

TEST_P(http_server_test, streams_a_chunked_response_and_an_http10_one_until_close) {
    start(test_router().as_handler());
    auto c = connect();
    auto r = roundtrip(c, "GET /stream HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(r);
    EXPECT_NE(r->head.find("Transfer-Encoding: chunked"), std::string::npos);
    EXPECT_EQ(r->body, "part0;part1;part2;");
    auto c10 = connect();
    r = roundtrip(c10, "GET /stream HTTP/1.0\r\n\r\n");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "part0;part1;part2;");
    EXPECT_EQ(r->head.find("Transfer-Encoding"), std::string::npos);
}

TEST_P(http_server_test, a_throwing_handler_gets_500_and_injected_fields_are_dropped) {
    start(test_router().as_handler());
    auto c = connect();
    auto r = roundtrip(c, "GET /throw HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 500);
    r = roundtrip(c, "GET /inject HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->head.find("Set-Cookie"), std::string::npos);
    EXPECT_EQ(r->head.find("X-Bad"), std::string::npos);
    EXPECT_NE(r->head.find("X-Good: fine\r\n"), std::string::npos);
}

TEST_P(http_server_test, hostile_corpus_gets_its_status_and_a_close_and_the_server_goes_on) {
    // Every valid request of the corpus is answered 200 after its body is read.
    start([](request& req, response& res) {
        auto b = req.body();
        if (b) res.body(req.path() == "/" ? "home" : "ok");
    });
    for (const auto& e : http_testing::load_corpus()) {
        auto c = connect();
        // Valid requests go to /echo (POST) or / (GET); the corpus targets / or /x.
        std::string bytes = e.bytes;
        if (size_t p = bytes.find("POST /x "); p != std::string::npos) bytes.replace(p, 8, "POST /echo ");
        ASSERT_TRUE(c.write_all(bytes.data(), bytes.size(), 5s)) << e.name;
        std::string buf;
        auto r = read_reply(c, buf);
        ASSERT_TRUE(r) << e.name;
        EXPECT_EQ(r->status, e.status ? e.status : 200) << e.name;
        if (e.status) {
            EXPECT_FALSE(r->keep_alive) << e.name;
            EXPECT_TRUE(buf.empty() && closed_by_server(c)) << e.name;
        }
    }
    auto c = connect();
    auto r = roundtrip(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "home");
}

TEST_P(http_server_test, limits_give_413_414_431) {
    server_options o;
    o.max_body_bytes = 100;
    o.limits.max_head_bytes = 1024;
    start(test_router().as_handler(), o);
    auto c = connect();
    auto r = roundtrip(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 101\r\n\r\n");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 413);
    c = connect();
    r = roundtrip(c, "POST /echo HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n65\r\n" +
                        std::string(101, 'a') + "\r\n0\r\n\r\n");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 413);
    c = connect();
    r = roundtrip(c, "GET /" + std::string(2000, 'a') + " HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 414);
    c = connect();
    std::string many = "GET / HTTP/1.1\r\nHost: t\r\n";
    for (int i = 0; i < 10000; ++i) many += "X: v\r\n";
    r = roundtrip(c, many + "\r\n");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 431);
}

TEST_P(http_server_test, slow_and_idle_clients_are_timed_out) {
    server_options o;
    o.header_timeout = 200ms;
    o.idle_timeout = 100ms;
    start(test_router().as_handler(), o);
    auto slow = connect();
    ASSERT_TRUE(send_text(slow, "GET / HTTP/1.1\r\nHo"));
    std::string buf;
    auto r = read_reply(slow, buf);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 408);
    EXPECT_TRUE(closed_by_server(slow));

    auto idle = connect();
    r = roundtrip(idle, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(r);
    EXPECT_TRUE(closed_by_server(idle));  // after idle_timeout
}

// Sends `start`, then a byte every 30 ms until the server answers: the answer must be 408,
// given after `limit` (300 ms) and long before the client would have finished, and the
// connection closed.
void expect_trickle_timed_out(net::stream& c, const std::string& start) {
    ASSERT_TRUE(send_text(c, start));
    const int64_t t0 = mono_now_ns();
    std::string buf;
    int sent = 0;
    for (; sent < 100 && buf.empty(); ++sent) {
        if (!send_text(c, "a")) break;  // the server may close first
        char tmp[4096];
        auto n = c.read_some(tmp, sizeof tmp, 30ms);  // the client's pace: a byte per 30 ms
        if (n) buf.append(tmp, *n);
        else ASSERT_EQ(n.error(), std::errc::timed_out);
    }
    auto r = read_reply(c, buf);
    const int64_t took = mono_now_ns() - t0;
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 408);
    EXPECT_GE(sent, 5);  // it kept sending while the deadline ran
    EXPECT_GE(took, 300'000'000);
    EXPECT_LT(took, 1'500'000'000);
    EXPECT_TRUE(closed_by_server(c));
}

// A client that keeps sending its head a byte at a time: every read completes at once, so
// only a deadline for the whole head (not one per read) ends it.
TEST_P(http_server_test, a_head_trickled_a_byte_at_a_time_is_timed_out_as_a_whole) {
    server_options o;
    o.header_timeout = 300ms;
    start(test_router().as_handler(), o);
    auto c = connect();
    expect_trickle_timed_out(c, "GET / HTTP/1.1\r\nX-Slow: ");
}

// A client that sends its body a byte at a time: every read completes within body_timeout, so
// only a deadline for the whole body (body_total_timeout) ends it, with 408. It kept the
// handler, and the connection's fiber, for as long as the client went on.
TEST_P(http_server_test, a_body_trickled_a_byte_at_a_time_is_timed_out_as_a_whole) {
    server_options o;
    o.body_timeout = 10s;  // beyond the test: no single read waits it out
    o.body_total_timeout = 300ms;
    start(test_router().as_handler(), o);
    auto c = connect();
    expect_trickle_timed_out(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n");
}

TEST_P(http_server_test, an_idle_connection_gives_its_buffers_back_and_serves_again) {
    server_options o;
    o.release_buffers_after = 1ms;
    start(test_router().as_handler(), o);
    auto c = connect();
    for (int i = 0; i < 3; ++i) {
        auto r = roundtrip(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nabc");
        ASSERT_TRUE(r) << i;
        EXPECT_EQ(r->body, "abc");
        ASSERT_TRUE(this_fiber::sleep_for(20ms));  // idle past release_buffers_after: the behaviour under test
    }
}

TEST_P(http_server_test, a_body_that_stalls_gets_408_and_absolute_form_targets_route_by_path) {
    server_options o;
    o.body_timeout = 100ms;
    start(test_router().as_handler(), o);
    auto c = connect();
    ASSERT_TRUE(send_text(c, "POST /echo HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nhalf"));
    std::string buf;
    auto r = read_reply(c, buf);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 408);
    EXPECT_TRUE(closed_by_server(c));
    auto d = connect();
    r = roundtrip(d, "GET http://t/path?x=1 HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "http://t/path?x=1");  // the handler sees the target as sent
}

// read_body with a timeout of the handler's own (a gRPC call's deadline): a client that sends
// part of its body and stalls has the read end with ETIMEDOUT after that timeout, not
// body_timeout, and gets the handler's answer at once; a client that keeps sending gets its
// body read whole although it takes several of those timeouts; and a read that timed out
// leaves the body readable.
TEST_P(http_server_test, read_body_waits_at_most_the_handlers_own_timeout) {
    constexpr auto k_wait = 200ms;
    server_options o;
    o.body_timeout = 10s;  // beyond the test: only the handler's timeout can end a read
    router r;
    r.post("/timed", [&](request& req, response& res) {
        std::string got;
        char buf[4096];
        for (;;) {
            auto n = req.read_body(buf, sizeof buf, k_wait);
            if (!n) {
                res.status(504);
                res.body(got + "|" + n.error().message());
                return;
            }
            if (*n == 0) break;
            got.append(buf, *n);
        }
        res.body(got);
    });
    // Waits out one timeout, says so in the first chunk of its answer, then reads the body.
    r.post("/again", [&](request& req, response& res) {
        char buf[4096];
        auto n = req.read_body(buf, sizeof buf, k_wait);
        if (n || n.error() != std::errc::timed_out) return res.status(500);
        if (!res.write("timed out;")) return;
        std::string got;
        for (;;) {
            n = req.read_body(buf, sizeof buf, 5s);
            if (!n || *n == 0) break;
            got.append(buf, *n);
        }
        (void)res.write(n ? got : std::string("failed"));
    });
    start(r.as_handler(), o);

    auto stalled = connect();
    ASSERT_TRUE(send_text(stalled, "POST /timed HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nhalf"));
    const int64_t t0 = mono_now_ns();
    std::string buf;
    auto rep = read_reply(stalled, buf);
    const int64_t took = mono_now_ns() - t0;
    ASSERT_TRUE(rep) << "no answer within 5 s";
    EXPECT_EQ(rep->status, 504);
    EXPECT_EQ(rep->body, "half|" + std::make_error_code(std::errc::timed_out).message());
    EXPECT_GE(took, 200'000'000);
    EXPECT_LT(took, 1'500'000'000);
    EXPECT_FALSE(rep->keep_alive);  // the rest of the body may still come: the connection ends
    EXPECT_TRUE(closed_by_server(stalled));

    auto steady = connect();
    ASSERT_TRUE(send_text(steady, "POST /timed HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\n"));
    const int64_t t1 = mono_now_ns();
    for (char ch = '0'; ch <= '9'; ++ch) {
        ASSERT_TRUE(this_fiber::sleep_for(k_wait / 4));  // the client's pace, well within the handler's wait
        ASSERT_TRUE(send_text(steady, std::string(1, ch)));
    }
    buf.clear();
    rep = read_reply(steady, buf);
    ASSERT_TRUE(rep);
    EXPECT_EQ(rep->status, 200) << rep->body;
    EXPECT_EQ(rep->body, "0123456789");
    EXPECT_TRUE(rep->keep_alive);
    EXPECT_GT(mono_now_ns() - t1, 400'000'000) << "the body must outlast the handler's timeout to mean anything";

    auto again = connect();
    ASSERT_TRUE(send_text(again, "POST /again HTTP/1.1\r\nHost: t\r\nContent-Length: 6\r\n\r\n"));
    std::string raw;
    char tmp[4096];
    while (raw.find("timed out;") == std::string::npos) {  // the rest of the body is sent only then
        auto n = again.read_some(tmp, sizeof tmp, 5s);
        ASSERT_TRUE(n && *n > 0) << raw;
        raw.append(tmp, *n);
    }
    ASSERT_TRUE(send_text(again, "abcdef"));
    while (!raw.ends_with("\r\n0\r\n\r\n")) {
        auto n = again.read_some(tmp, sizeof tmp, 5s);
        ASSERT_TRUE(n && *n > 0) << raw;
        raw.append(tmp, *n);
    }
    EXPECT_NE(raw.find("\r\n6\r\nabcdef\r\n"), std::string::npos) << raw;
}

/// Routes that change their request's body limits, on a server that takes bodies of at most 100
/// bytes: "/raise" (and "/mw/...", raised by a middleware) takes 1000, "/lower" 10, "/midway"
/// lowers the limit to 20 once 50 bytes were read, "/after" to 1 once the whole body was read.
/// Each answers "got N" with the body's length; a read that fails leaves the answer to the
/// server (413), "/midway" and "/whole" (request::body()) noting the error in `last_error`.
router body_limit_routes(int& last_error) {
    router r;
    r.use([](request& req, response&) {
        if (req.path().starts_with("/mw/")) req.max_body_bytes(1000);
        return true;
    });
    auto echo_length = [](request& req, response& res) {
        if (auto b = req.body()) res.body("got " + std::to_string(b->size()));
    };
    r.post("/echo", echo_length);
    r.post("/mw/echo", echo_length);
    r.post("/raise", [=](request& req, response& res) {
        req.max_body_bytes(1000);
        echo_length(req, res);
    });
    r.post("/lower", [=](request& req, response& res) {
        req.max_body_bytes(10);
        echo_length(req, res);
    });
    r.post("/whole", [&last_error](request& req, response&) {
        auto b = req.body();
        last_error = b ? 0 : b.error().value();
    });
    r.post("/midway", [&last_error](request& req, response& res) {
        char buf[64];
        size_t got = 0;
        while (got < 50) {
            auto n = req.read_body(buf, sizeof buf);
            if (!n || *n == 0) return res.status(500);
            got += *n;
        }
        req.max_body_bytes(20);  // below the 50 bytes that came
        auto n = req.read_body(buf, sizeof buf);
        last_error = n ? 0 : n.error().value();
    });
    r.post("/after", [](request& req, response& res) {
        auto b = req.body();
        if (!b) return res.status(500);
        const size_t size = b->size();
        req.max_body_bytes(1);  // the body has been read: no effect
        char buf[8];
        auto n = req.read_body(buf, sizeof buf);
        res.body("got " + std::to_string(size) + (n && *n == 0 ? " then the end" : " then an error"));
    });
    return r;
}

// A handler (or a middleware) sets the body limit of its own request: a route takes more than
// the server's max_body_bytes, whether the body declares its length or is chunked, or less,
// down to below what has already arrived (413 at the next read); set after the body was read
// it changes nothing. A declared length over the server's limit was refused before any
// handler ran, so no route could take a larger upload.
TEST_P(http_server_test, a_route_raises_or_lowers_its_requests_body_limit) {
    server_options o;
    o.max_body_bytes = 100;
    int last_error = 0;
    start(body_limit_routes(last_error).as_handler(), o);
    const std::string big(500, 'b'), small(50, 's');
    auto post_length = [](const char* path, const std::string& body) {
        return std::string("POST ") + path + " HTTP/1.1\r\nHost: t\r\nContent-Length: " +
               std::to_string(body.size()) + "\r\n\r\n" + body;
    };
    auto post_chunked = [](const char* path, const std::string& body) {
        char size[16];
        std::snprintf(size, sizeof size, "%zx", body.size());
        return std::string("POST ") + path + " HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n" +
               size + "\r\n" + body + "\r\n0\r\n\r\n";
    };
    struct probe {
        std::string request;
        int status;
        const char* body;
    };
    const probe probes[] = {
        {post_length("/raise", big), 200, "got 500"},
        {post_chunked("/raise", big), 200, "got 500"},
        {post_length("/mw/echo", big), 200, "got 500"},
        {post_chunked("/mw/echo", big), 200, "got 500"},
        {post_length("/echo", big), 413, nullptr},  // the server's own limit still holds elsewhere
        {post_chunked("/echo", big), 413, nullptr},
        {post_length("/echo", small), 200, "got 50"},
        {post_length("/lower", small), 413, nullptr},
        {post_chunked("/lower", small), 413, nullptr},
        {post_length("/after", small), 200, "got 50 then the end"},
        {post_chunked("/after", small), 200, "got 50 then the end"},
    };
    for (const probe& p : probes) {
        auto c = connect();
        auto r = roundtrip(c, p.request);
        ASSERT_TRUE(r) << p.request.substr(0, 40);
        EXPECT_EQ(r->status, p.status) << p.request.substr(0, 40) << ": " << r->body;
        if (p.body) {
            EXPECT_EQ(r->body, p.body) << p.request.substr(0, 40);
        }
    }
    // Lowered below what was read: the next read fails, and the server answers 413. And a
    // declared length far over the limit, now seen by the handler, fails body() at once rather
    // than sizing its buffer first (which threw).
    for (const std::string& req : {post_length("/midway", std::string(90, 'm')), post_chunked("/midway", std::string(90, 'm')),
                                   std::string("POST /whole HTTP/1.1\r\nHost: t\r\nContent-Length: 999999999999999999\r\n\r\n")}) {
        last_error = -1;
        auto c = connect();
        auto r = roundtrip(c, req);
        ASSERT_TRUE(r) << req.substr(0, 40);
        EXPECT_EQ(r->status, 413) << req.substr(0, 40);
        EXPECT_EQ(last_error, EMSGSIZE) << req.substr(0, 40);
    }
}

// A handler sets the timeouts of its own request's body: a route that waits longer between
// reads than the server's body_timeout gets a body that pauses past it, one that waits less
// ends a stalled body sooner (408), and body_total_timeout bounds the rest of a trickled body
// from when the handler set it.
TEST_P(http_server_test, a_route_sets_its_requests_body_timeouts) {
    constexpr auto k_body_timeout = 200ms;
    server_options o;
    o.body_timeout = k_body_timeout;
    event parked;  // "/patient" read the first part and reads again
    router r;
    r.post("/patient", [&](request& req, response& res) {
        req.body_timeout(10s);
        std::string got;
        char buf[64];
        for (;;) {
            auto n = req.read_body(buf, sizeof buf);
            if (!n) return;  // the server answers the error
            if (*n == 0) break;
            got.append(buf, *n);
            parked.set();
        }
        res.body(got);
    });
    r.post("/hasty", [](request& req, response& res) {
        req.body_timeout(50ms);
        if (auto b = req.body()) res.body(std::string(*b));
    });
    r.post("/total", [](request& req, response& res) {
        req.body_total_timeout(300ms);
        if (auto b = req.body()) res.body(std::string(*b));
    });
    start(r.as_handler(), o);

    auto c = connect();
    ASSERT_TRUE(send_text(c, "POST /patient HTTP/1.1\r\nHost: t\r\nContent-Length: 6\r\n\r\nabc"));
    ASSERT_TRUE(parked.wait(10s));
    ASSERT_TRUE(this_fiber::sleep_for(3 * k_body_timeout));  // the pause under test, past body_timeout
    ASSERT_TRUE(send_text(c, "def"));
    std::string buf;
    auto rep = read_reply(c, buf);
    ASSERT_TRUE(rep);
    EXPECT_EQ(rep->status, 200) << rep->body;
    EXPECT_EQ(rep->body, "abcdef");

    // A server whose own timeouts are beyond the test: only the routes' can end the reads.
    o.body_timeout = 10s;
    start(r.as_handler(), o);
    auto hasty = connect();
    ASSERT_TRUE(send_text(hasty, "POST /hasty HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nhalf"));
    buf.clear();
    rep = read_reply(hasty, buf);
    ASSERT_TRUE(rep);
    EXPECT_EQ(rep->status, 408);
    EXPECT_TRUE(closed_by_server(hasty));

    auto trickled = connect();
    expect_trickle_timed_out(trickled, "POST /total HTTP/1.1\r\nHost: t\r\nContent-Length: 1000\r\n\r\n");
}

TEST_P(http_server_test, targets_in_no_allowed_form_get_400_and_absolute_form_names_the_host) {
    start([](request& req, response& res) {
        res.body(std::string(req.host()) + " " + std::string(req.path()) + " " + std::string(req.query()));
    });
    auto c = connect();
    auto r = roundtrip(c, "GET http://h.example:8080?x=/y HTTP/1.1\r\nHost: other\r\n\r\n");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "h.example:8080 / x=/y");
    for (const char* bad : {"GET foo HTTP/1.1\r\nHost: t\r\n\r\n", "GET /a#b HTTP/1.1\r\nHost: t\r\n\r\n",
                            "GET * HTTP/1.1\r\nHost: t\r\n\r\n", "POST t:80 HTTP/1.1\r\nHost: t\r\n\r\n",
                            "GET ftp://t/ HTTP/1.1\r\nHost: t\r\n\r\n"}) {
        auto d = connect();
        std::string buf;
        ASSERT_TRUE(send_text(d, bad)) << bad;
        r = read_reply(d, buf);
        ASSERT_TRUE(r) << bad;
        EXPECT_EQ(r->status, 400) << bad;
        EXPECT_TRUE(closed_by_server(d)) << bad;
    }
}

TEST_P(http_server_test, the_last_request_allowed_on_a_connection_says_close) {
    server_options o;
    o.max_requests_per_connection = 2;
    start(test_router().as_handler(), o);
    auto c = connect();
    auto r = roundtrip(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    EXPECT_TRUE(r && r->keep_alive);
    r = roundtrip(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(r);
    EXPECT_FALSE(r->keep_alive);
    EXPECT_TRUE(closed_by_server(c));
}

TEST_P(http_server_test, graceful_stop_closes_idle_connections_and_finishes_requests_in_flight) {
    event entered, release;
    router rt;
    rt.get("/", [](request&, response& res) { res.body("home"); });
    rt.get("/slow", [&](request&, response& res) {
        entered.set();
        ASSERT_TRUE(release.wait(5s));
        res.body("done");
    });
    start(rt.as_handler());
    auto idle = connect();
    auto r = roundtrip(idle, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(r);
    auto busy = connect();
    ASSERT_TRUE(send_text(busy, "GET /slow HTTP/1.1\r\nHost: t\r\n\r\n"));
    ASSERT_TRUE(entered.wait(5s));
    auto stopper = spawn([&] { srv_->stop(5s); });
    ASSERT_TRUE(stopper);
    EXPECT_TRUE(closed_by_server(idle));
    release.set();
    std::string buf;
    r = read_reply(busy, buf);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "done");
    EXPECT_FALSE(r->keep_alive);
    EXPECT_TRUE(closed_by_server(busy));
    ASSERT_TRUE(stopper->join());
    EXPECT_EQ(srv_->connections(), 0u);
}

TEST_P(http_server_test, middleware_runs_first_and_can_answer_and_the_access_log_records) {
    std::vector<std::string> lines;
    log::set_sink([](log::level, std::string_view line, void* ctx) {
        static_cast<std::vector<std::string>*>(ctx)->emplace_back(line);
    }, &lines);
    router r = test_router();
    int seen = 0;
    r.use([&](request& req, response& res) {
        ++seen;
        if (req.header("Authorization") == "let me in") return true;
        res.status(401);
        res.body("no\n");
        return false;
    });
    server_options o;
    o.access_log = true;
    start(r.as_handler(), o);
    auto c = connect();
    auto denied = roundtrip(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(denied);
    EXPECT_EQ(denied->status, 401);
    auto ok = roundtrip(c, "GET /path?q=1 HTTP/1.1\r\nHost: t\r\nAuthorization: let me in\r\n\r\n");
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->body, "/path?q=1");
    EXPECT_EQ(seen, 2);
    log::reset_sink();
    std::vector<std::string> access;
    for (auto& l : lines)
        if (l.find("\"GET ") != std::string::npos) access.push_back(l);
    ASSERT_EQ(access.size(), 2u);
    EXPECT_NE(access[0].find("127.0.0.1"), std::string::npos) << access[0];
    EXPECT_NE(access[0].find("\"GET / HTTP/1.1\" 401"), std::string::npos) << access[0];
    EXPECT_NE(access[1].find("\"GET /path?q=1 HTTP/1.1\" 200 " + std::to_string(ok->head.size() + 9)),
              std::string::npos) << access[1];  // the bytes of this response: head and body
}

/// Open fds of this process (the server and the test's clients share it).
size_t open_fds() {
    size_t n = 0;
    if (DIR* d = opendir("/proc/self/fd")) {
        while (readdir(d)) ++n;
        closedir(d);
    }
    return n;
}

/// Polls a condition the server reaches on its own (a connection's fiber ending), up to 5 s.
template <typename F>
bool eventually(F&& f) {
    for (int i = 0; i < 5000; ++i) {
        if (f()) return true;
        (void)this_fiber::sleep_for(1ms);
    }
    return f();
}

TEST_P(http_server_test, clients_that_reset_or_never_read_cost_nothing_lasting) {
    server_options o;
    o.send_timeout = 200ms;
    router r = test_router();
    r.get("/huge", [](request&, response& res) { res.body(std::string(32 << 20, 'h')); });
    start(r.as_handler(), o);
    size_t fds = open_fds();
    {
        // Never reads its 32 MiB answer: the send times out and the connection goes.
        auto lazy = connect();
        ASSERT_TRUE(send_text(lazy, "GET /huge HTTP/1.1\r\nHost: t\r\n\r\n"));
        // Resets in the middle of a request head.
        auto half = connect();
        ASSERT_TRUE(send_text(half, "GET / HTTP/1.1\r\nHo"));
        ASSERT_TRUE(half.set_linger(true, 0));
        ASSERT_TRUE(half.close());
        // Resets in the middle of its answer.
        auto mid = connect();
        ASSERT_TRUE(send_text(mid, "GET /huge HTTP/1.1\r\nHost: t\r\n\r\n"));
        char buf[1000];
        ASSERT_TRUE(mid.read_some(buf, sizeof buf, 5s));
        ASSERT_TRUE(mid.set_linger(true, 0));
        ASSERT_TRUE(mid.close());
        EXPECT_TRUE(eventually([&] { return srv_->connections() <= 1; }));
        auto c = connect();  // others are served meanwhile
        auto ok = roundtrip(c, "GET / HTTP/1.1\r\nHost: t\r\n\r\n");
        ASSERT_TRUE(ok);
        EXPECT_EQ(ok->body, "home");
        EXPECT_TRUE(eventually([&] { return srv_->connections() == 1; }));  // c; the lazy one timed out
    }
    EXPECT_TRUE(eventually([&] { return srv_->connections() == 0; }));
    EXPECT_TRUE(eventually([&] { return open_fds() == fds; })) << open_fds() << " fds, " << fds << " before";
}

// Routes match the path's normal form: no spelling of "/admin" gets past its route to a
// catch-all behind it, and a ".." above the root is refused before any handler.
TEST_P(http_server_test, no_spelling_of_a_path_gets_past_its_route) {
    router r;
    r.get("/admin/*", [](request&, response& res) {
        res.status(403);
        res.body("denied");
    });
    r.get("/*", [](request& req, response& res) { res.body("open:" + std::string(req.param("*"))); });
    start(r.as_handler());
    auto c = connect();
    for (const char* t : {"/admin/x", "/%61dmin/x", "/%61%64%6D%69%6E/x", "//admin/x", "/./admin/x", "/y/../admin/x",
                          "/y/%2e%2e/admin/x", "/admin//x"}) {
        auto reply = roundtrip(c, std::string("GET ") + t + " HTTP/1.1\r\nHost: t\r\n\r\n");
        ASSERT_TRUE(reply) << t;
        EXPECT_EQ(reply->status, 403) << t;
        EXPECT_EQ(reply->body, "denied") << t;
    }
    auto open = roundtrip(c, "GET /admins/x HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(open);
    EXPECT_EQ(open->body, "open:admins/x");
    auto c2 = connect();
    auto above = roundtrip(c2, "GET /a/../../etc/passwd HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(above);
    EXPECT_EQ(above->status, 400);
}

// send_timeout bounds each wait between two writes, not the whole response: a client that
// reads a large body slowly but steadily gets all of it, from memory (writev) and from a file
// (sendfile), although the transfer takes several send timeouts.
TEST_P(http_server_test, a_slow_steady_reader_gets_a_body_that_outlasts_the_send_timeout) {
    constexpr size_t k_size = 16 << 20;
    char path[] = "/tmp/gluon-slowread-XXXXXX";
    int file = mkstemp(path);
    ASSERT_GE(file, 0);
    ::unlink(path);
    std::string data(k_size, 'f');
    ASSERT_EQ(::pwrite(file, data.data(), data.size(), 0), static_cast<ssize_t>(data.size()));
    server_options o;
    // Long enough for the wait until a full send buffer (up to 4 MiB) has drained far enough
    // to be writable again at this reader's pace; far shorter than the whole transfer.
    o.send_timeout = 400ms;
    router r = test_router();
    r.get("/mem", [](request&, response& res) { res.body(std::string(k_size, 'm')); });
    r.get("/file", [file](request&, response& res) { res.file(file, 0, k_size, false); });
    start(r.as_handler(), o);
    for (const char* target : {"/mem", "/file"}) {
        auto c = connect();
        ASSERT_TRUE(send_text(c, std::string("GET ") + target + " HTTP/1.1\r\nHost: t\r\n\r\n"));
        const auto t0 = std::chrono::steady_clock::now();
        size_t got = 0;
        char buf[64 * 1024];
        for (;;) {  // a steady reader: up to 64 KiB, then a pause far shorter than the timeout
            auto n = c.read_some(buf, sizeof buf, 5s);
            if (!n || *n == 0) break;
            got += *n;
            if (got >= k_size) break;  // (the head's bytes too: enough to have it all)
            (void)this_fiber::sleep_for(3ms);
        }
        const auto took = std::chrono::steady_clock::now() - t0;
        EXPECT_GE(got, k_size) << target;
        EXPECT_GT(took, 3 * o.send_timeout / 2) << target << ": the transfer must outlast the timeout to mean anything";
    }
    ::close(file);
}

// A handler that throws after its streamed response has begun: the connection closes without
// the last chunk, so the client sees a broken body, never a short one that looks complete.
TEST_P(http_server_test, a_handler_throwing_mid_stream_leaves_the_body_unterminated) {
    router r = test_router();
    r.get("/half", [](request&, response& res) {
        ASSERT_TRUE(res.write("first part;"));
        throw std::runtime_error("boom");
    });
    start(r.as_handler());
    auto c = connect();
    ASSERT_TRUE(send_text(c, "GET /half HTTP/1.1\r\nHost: t\r\n\r\n"));
    std::string all;
    char buf[4096];
    for (;;) {
        auto n = c.read_some(buf, sizeof buf, 5s);
        ASSERT_TRUE(n);
        if (*n == 0) break;
        all.append(buf, *n);
    }
    EXPECT_NE(all.find("first part;"), std::string::npos) << all;
    EXPECT_EQ(all.find("\r\n0\r\n"), std::string::npos) << all;
}

// A handler that aborts (or takes the connection over) ends the connection, but the answers to
// the requests pipelined before its own, buffered to leave in one send, still go out.
TEST_P(http_server_test, an_aborted_response_still_lets_earlier_pipelined_answers_out) {
    router r = test_router();
    r.get("/abort", [](request&, response& res) { res.abort(); });
    r.get("/detach", [](request& req, response& res) {
        res.detach();
        const std::string_view own = "HTTP/1.1 204 No Content\r\n\r\n";
        ASSERT_TRUE(req.stream().write_all(own.data(), own.size(), 5s));
    });
    start(r.as_handler());
    for (std::string last : {"/abort", "/detach"}) {
        auto c = connect();
        const std::string batch = pipelined_batch(2) + "GET " + last + " HTTP/1.1\r\nHost: t\r\n\r\n";
        ASSERT_TRUE(c.write_all(batch.data(), batch.size(), 5s));
        std::string buf;
        for (int i = 0; i < 2; ++i) {
            auto reply = read_reply(c, buf);
            ASSERT_TRUE(reply) << last << " " << i;
            EXPECT_EQ(reply->body, "/path?n=" + std::to_string(i));
        }
        if (last == "/detach") {  // the handler's own bytes come after them
            auto own = read_reply(c, buf);
            ASSERT_TRUE(own);
            EXPECT_EQ(own->status, 204);
        }
        char tmp[256];
        auto n = c.read_some(tmp, sizeof tmp, 5s);
        ASSERT_TRUE(n);
        EXPECT_EQ(*n + buf.size(), 0u) << last;  // then the connection ends
    }
}

// The error answer to a request that does not parse has its body even right after a HEAD
// request on the same connection.
TEST_P(http_server_test, an_unparsable_request_after_a_head_gets_a_whole_error_answer) {
    start(test_router().as_handler());
    auto c = connect();
    ASSERT_TRUE(send_text(c, "HEAD / HTTP/1.1\r\nHost: t\r\n\r\n BAD / HTTP/1.1\r\n\r\n"));
    std::string buf;
    auto head = read_reply(c, buf, method::head);
    ASSERT_TRUE(head);
    EXPECT_EQ(head->status, 200);
    auto bad = read_reply(c, buf);
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->status, 400);
    EXPECT_EQ(bad->body, "400 Bad Request\n");
}

TEST_P(http_server_test, after_the_hostile_corpus_no_connection_or_fd_is_left) {
    start(test_router().as_handler());
    size_t fds = open_fds();
    for (const auto& e : http_testing::load_corpus()) {
        auto c = connect();
        ASSERT_TRUE(c.write_all(e.bytes.data(), e.bytes.size(), 5s)) << e.name;
        std::string buf;
        ASSERT_TRUE(read_reply(c, buf)) << e.name;
    }
    EXPECT_TRUE(eventually([&] { return srv_->connections() == 0; }));
    EXPECT_TRUE(eventually([&] { return open_fds() == fds; })) << open_fds() << " fds, " << fds << " before";
}

GLUON_ENGINE_TEST_SUITE(http_server_test);

}  // namespace
}  // namespace gluon::http
