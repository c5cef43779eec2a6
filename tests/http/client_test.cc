// The HTTP client against gluon's own server (plain and TLS), a misbehaving raw server, and a
// CONNECT proxy, on every engine.
#include "gluon/http/client.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>

#include "gluon/http/router.h"
#include "gluon/net/resolver.h"
#include "gluon/net/tls.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sync/semaphore.h"
#include "net/tls_test_support.h"
#include "support/nginx.h"
#include "test_support.h"

namespace gluon::http {
namespace {

using namespace std::chrono_literals;

class http_client_test : public test::engine_test {
protected:
    void TearDown() override {
        servers_.clear();
        raw_.clear();
        test::engine_test::TearDown();
    }
    std::string serve(handler h, server_options o = {}) {
        auto s = server::start(net::address::ipv4_loopback(0), std::move(h), std::move(o));
        EXPECT_TRUE(s) << s.error().message();
        std::string origin = "http://127.0.0.1:" + std::to_string((*s)->local_address().port());
        servers_.push_back(std::move(*s));
        return origin;
    }
    /// A raw server for behaviour an HTTP server would not show.
    uint16_t serve_raw(net::server::handler h) {
        auto s = net::server::start(net::address::ipv4_loopback(0), std::move(h));
        EXPECT_TRUE(s);
        uint16_t port = (*s)->local_address().port();
        raw_.push_back(std::move(*s));
        return port;
    }
    router app() {
        router r;
        r.get("/hello", [](request&, response& res) { res.body("hello"); });
        r.post("/echo", [](request& req, response& res) {
            auto b = req.body();
            if (b) res.body(*b);
        });
        r.get("/chunked", [](request&, response& res) {
            for (int i = 0; i < 100; ++i) ASSERT_TRUE(res.write(std::string(1000, static_cast<char>('a' + i % 26))));
        });
        r.get("/headers", [](request& req, response& res) {
            res.body(std::string(req.header("Authorization")) + "|" + std::string(req.header("X-Custom")));
        });
        r.get("/big", [](request&, response& res) { res.body(std::string(100000, 'b')); });
        return r;
    }
    std::vector<std::unique_ptr<server>> servers_;
    std::vector<std::unique_ptr<net::server>> raw_;
};

TEST_P(http_client_test, gets_and_reuses_a_kept_alive_connection) {
    std::string origin = serve(app().as_handler());
    client c;
    for (int i = 0; i < 3; ++i) {
        auto r = c.get(origin + "/hello");
        ASSERT_TRUE(r) << r.error().message();
        EXPECT_EQ(r->status, 200);
        EXPECT_EQ(r->body, "hello");
        EXPECT_EQ(r->header("content-length"), "5");
    }
    auto st = c.statistics();
    EXPECT_EQ(st.connections_opened, 1u);
    EXPECT_EQ(st.connections_reused, 2u);
    EXPECT_EQ(st.idle, 1u);
}

TEST_P(http_client_test, sends_bodies_whole_and_streamed_and_reads_chunked_ones) {
    std::string origin = serve(app().as_handler());
    client c;
    client_request req;
    req.method = method::post;
    req.url = origin + "/echo";
    req.body = "a body";
    auto r = c.send(req);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "a body");

    int calls = 0;
    req.body.clear();
    req.body_source = [&](char* buf, size_t n) -> result<size_t> {
        if (calls++ == 50) return size_t{0};
        std::memset(buf, 'z', n < 3000 ? n : 3000);
        return n < 3000 ? n : size_t{3000};
    };
    r = c.send(req);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->body, std::string(150000, 'z'));

    r = c.get(origin + "/chunked");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body.size(), 100000u);
    EXPECT_EQ(r->body.substr(1000, 3), "bbb");

    size_t streamed = 0;
    client_request big;
    big.url = origin + "/big";
    r = c.send(big, [&](std::string_view piece) {
        streamed += piece.size();
        return true;
    });
    ASSERT_TRUE(r);
    EXPECT_EQ(streamed, 100000u);
    EXPECT_TRUE(r->body.empty());
}

TEST_P(http_client_test, follows_redirects_within_bounds_and_drops_credentials_across_origins) {
    std::string other = serve(app().as_handler());
    router r = app();
    r.get("/to-hello", [](request&, response& res) {
        res.status(302);
        res.header("Location", "hello");  // relative
    });
    r.get("/loop", [](request&, response& res) {
        res.status(307);
        res.header("Location", "/loop");
    });
    r.post("/see-other", [](request&, response& res) {
        res.status(303);
        res.header("Location", "/hello");
    });
    std::string away_target = other + "/headers";
    r.get("/away", [away_target](request&, response& res) {
        res.status(301);
        res.header("Location", away_target);
    });
    std::string origin = serve(r.as_handler());
    client c;
    auto got = c.get(origin + "/to-hello");
    ASSERT_TRUE(got);
    EXPECT_EQ(got->body, "hello");
    EXPECT_EQ(got->url, origin + "/hello");
    EXPECT_EQ(c.get(origin + "/loop").error(), std::errc::too_many_symbolic_link_levels);
    client_request post;
    post.method = method::post;
    post.url = origin + "/see-other";
    post.body = "x";
    got = c.send(post);
    ASSERT_TRUE(got);
    EXPECT_EQ(got->body, "hello");
    client_request auth;
    auth.url = origin + "/away";
    auth.headers = {{"Authorization", "Bearer secret"}, {"X-Custom", "kept"}};
    got = c.send(auth);
    ASSERT_TRUE(got);
    EXPECT_EQ(got->body, "|kept");
    client no_follow({.max_redirects = 0});
    got = no_follow.get(origin + "/to-hello");
    ASSERT_TRUE(got);
    EXPECT_EQ(got->status, 302);
}

TEST_P(http_client_test, a_head_request_stays_head_through_301_302_and_303) {
    std::string origin = serve([](request& req, response& res) {
        if (req.path() == "/method") {
            res.header("X-Method", req.method_name());
            res.body("a body that HEAD must not fetch");
            return;
        }
        res.status(req.path() == "/r301" ? 301 : req.path() == "/r302" ? 302 : 303);
        res.header("Location", "/method");
    });
    client c;
    for (const char* from : {"/r301", "/r302", "/r303"}) {
        client_request head;
        head.method = method::head;
        head.url = origin + from;
        auto got = c.send(head);
        ASSERT_TRUE(got) << from;
        EXPECT_EQ(got->status, 200) << from;
        EXPECT_EQ(got->header("X-Method"), "HEAD") << from;
        EXPECT_TRUE(got->body.empty()) << from;
        client_request post;
        post.method = method::post;
        post.url = origin + from;
        post.body = "x";
        got = c.send(post);
        ASSERT_TRUE(got) << from;
        EXPECT_EQ(got->header("X-Method"), "GET") << from;  // (unchanged: POST becomes GET)
    }
}

// A redirect the call follows is not the caller's answer: its body reaches neither on_body nor
// the caller's buffer, which get the final answer's body alone.
TEST_P(http_client_test, a_followed_redirects_body_is_not_handed_to_the_caller) {
    router r = app();
    r.get("/moved", [](request&, response& res) {
        res.status(301);
        res.header("Location", "/hello");
        res.body("<a href=\"/hello\">moved</a>");
    });
    std::string origin = serve(r.as_handler());
    client c;
    client_request q;
    q.url = origin + "/moved";
    std::string got;
    auto res = c.send(q, [&](std::string_view piece) {
        got.append(piece);
        return true;
    });
    ASSERT_TRUE(res) << res.error().message();
    EXPECT_EQ(res->status, 200);
    EXPECT_EQ(got, "hello");
    EXPECT_TRUE(res->body.empty());
    std::string buf(64, '\0');
    q.body_into = buf.data();
    q.body_into_size = buf.size();
    res = c.send(q);
    ASSERT_TRUE(res) << res.error().message();
    EXPECT_EQ(res->body_length, 5u);
    EXPECT_EQ(buf.substr(0, 5), "hello");
    client no_follow({.max_redirects = 0});  // not followed: the redirect is the answer, body and all
    got.clear();
    q.body_into = nullptr;
    res = no_follow.send(q, [&](std::string_view piece) {
        got.append(piece);
        return true;
    });
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 301);
    EXPECT_EQ(got, "<a href=\"/hello\">moved</a>");
}

// A 3xx that is the call's answer (redirects off, or no Location to follow) is not the body
// the caller's buffer was sized for: it goes to out.body, and the buffer is left alone (the
// HTTP/2 test of the same name holds the client to this over HTTP/2).
TEST_P(http_client_test, a_redirect_not_followed_has_its_body_in_the_response_not_the_buffer) {
    router r = app();
    r.get("/moved", [](request&, response& res) {
        res.status(301);
        res.header("Location", "/hello");
        res.body("<a href=\"/hello\">moved</a>");
    });
    r.get("/nowhere", [](request&, response& res) {
        res.status(300);  // no Location: nothing to follow
        res.body("pick one: /a or /b");
    });
    std::string origin = serve(r.as_handler());
    std::string buf(8, '-');  // smaller than either body: EMSGSIZE had they gone into it
    client_request q;
    q.body_into = buf.data();
    q.body_into_size = buf.size();
    client no_follow({.max_redirects = 0});
    q.url = origin + "/moved";
    auto res = no_follow.send(q);
    ASSERT_TRUE(res) << res.error().message();
    EXPECT_EQ(res->status, 301);
    EXPECT_EQ(res->body, "<a href=\"/hello\">moved</a>");
    EXPECT_EQ(res->body_length, res->body.size());
    EXPECT_EQ(buf, std::string(8, '-'));
    client c;
    q.url = origin + "/nowhere";
    res = c.send(q);
    ASSERT_TRUE(res) << res.error().message();
    EXPECT_EQ(res->status, 300);
    EXPECT_EQ(res->body, "pick one: /a or /b");
    EXPECT_EQ(res->body_length, res->body.size());
    EXPECT_EQ(buf, std::string(8, '-'));
}

// A streamed body is read once: a redirect that keeps the method and its body (307, 308, and
// 301 and 302 of anything but a POST) is the answer, and nothing is sent to its Location; one
// that turns the request into a GET is followed without a body.
TEST_P(http_client_test, a_redirect_that_would_send_a_streamed_body_again_is_the_answer) {
    std::atomic<int> finals{0};
    std::string origin = serve([&finals](request& req, response& res) {
        if (req.path() == "/final") {
            ++finals;
            auto b = req.body();
            res.body(std::string(req.method_name()) + " " + std::string(b ? *b : "?"));
            return;
        }
        auto b = req.body();  // the whole upload, then the redirect
        res.status(std::stoi(std::string(req.path().substr(2))));
        res.header("Location", "/final");
        res.body(b ? *b : "?");
    });
    client c;
    for (method m : {method::put, method::patch, method::post}) {
        for (int status : {301, 302, 303, 307, 308}) {
            SCOPED_TRACE(std::string(method_name(m)) + " " + std::to_string(status));
            client_request req;
            req.method = m;
            req.url = origin + "/r" + std::to_string(status);
            int calls = 0;
            req.body_source = [&calls](char* buf, size_t) -> result<size_t> {
                if (calls++ > 0) return size_t{0};
                std::memcpy(buf, "data", 4);
                return size_t{4};
            };
            const int before = finals.load();
            auto got = c.send(req);
            ASSERT_TRUE(got) << got.error().message();
            const bool to_get = status == 303 || (m == method::post && status != 307 && status != 308);
            if (to_get) {
                EXPECT_EQ(got->status, 200);
                EXPECT_EQ(got->body, "GET ");
                EXPECT_EQ(finals.load(), before + 1);
            } else {
                EXPECT_EQ(got->status, status);
                EXPECT_EQ(got->body, "data");  // the redirect's own answer
                EXPECT_EQ(finals.load(), before);
            }
            EXPECT_EQ(calls, 2);  // read to its end once, never again
        }
    }
}

TEST_P(http_client_test, a_field_name_that_is_not_a_token_is_refused_and_nothing_sent) {
    std::atomic<int> served{0};
    std::string origin = serve([&served](request&, response& res) {
        ++served;
        res.body("ok");
    });
    client c;
    for (const char* name : {"Transfer-Encoding ", "", "X Y", "X:Y", "X\r\nY", "X\nY", " X", "X\tY"}) {
        client_request req;
        req.method = method::post;
        req.url = origin + "/";
        req.headers = {{name, "chunked"}};
        req.body = "abc";
        auto got = c.send(req);
        ASSERT_FALSE(got) << name;
        EXPECT_EQ(got.error(), std::errc::invalid_argument) << name;
    }
    client_request value;
    value.url = origin + "/";
    value.headers = {{"X-V", std::string("a\0b", 3)}};
    EXPECT_EQ(c.send(value).error(), std::errc::invalid_argument);
    EXPECT_EQ(served.load(), 0);
    EXPECT_EQ(c.statistics().connections_opened, 0u);
    client_request fine;
    fine.url = origin + "/";
    fine.headers = {{"X-Fine_!#$%&'*+-.^`|~", "v"}};
    auto got = c.send(fine);
    ASSERT_TRUE(got);
    EXPECT_EQ(got->body, "ok");
}

TEST_P(http_client_test, retries_an_idempotent_request_once_when_the_connection_dies_unanswered) {
    std::atomic<bool> hang_next{false};
    uint16_t port = serve_raw([&](net::byte_stream& s) {
        char buf[4096];
        auto n = s.read_some(buf, sizeof buf, 5s);
        if (!n || *n == 0) return;
        if (hang_next.exchange(false)) return;  // hang up without answering
        std::string ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
        (void)s.write_all(ok.data(), ok.size(), 5s);
    });
    std::string origin = "http://127.0.0.1:" + std::to_string(port);
    client c;
    hang_next = true;
    auto r = c.get(origin + "/");
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->body, "ok");
    EXPECT_EQ(c.statistics().retries, 1u);
    client_request post;
    post.method = method::post;
    post.url = origin + "/";
    post.body = "once";
    hang_next = true;
    EXPECT_FALSE(c.send(post));  // not idempotent: not sent twice
    EXPECT_EQ(c.statistics().retries, 1u);
    client no_retries({.retries = 0});
    hang_next = true;
    EXPECT_FALSE(no_retries.get(origin + "/"));
}

// A server that refuses a body before it has taken it (here a 413, the body being over its
// limit) answers and closes the connection while the client is still writing: the write fails
// (EPIPE or ECONNRESET), but the answer has arrived and is the call's. It was not read: the
// call failed with the write's error, after sending the whole body again (PUT is idempotent).
TEST_P(http_client_test, an_answer_before_the_whole_body_is_the_calls_not_a_broken_pipe) {
    server_options o;
    o.max_body_bytes = 1024;
    std::atomic<int> bodies{0};
    std::string origin = serve([&](request& req, response& res) {
        if (req.body()) ++bodies;  // a chunked body over the limit: the server answers 413
        res.body("taken");
    }, o);
    constexpr size_t k_size = 32 << 20;  // far more than the sockets' buffers hold
    client c;
    client_request put;
    put.method = method::put;
    put.url = origin + "/upload";
    put.body.assign(k_size, 'p');
    auto r = c.send(put);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->status, 413);
    EXPECT_EQ(c.statistics().retries, 0u);

    client_request post;  // streamed (chunked): the server finds it too long as it reads it
    post.method = method::post;
    post.url = origin + "/upload";
    size_t sent = 0;
    post.body_source = [&](char* buf, size_t n) -> result<size_t> {
        size_t k = std::min(n, k_size - sent);
        std::memset(buf, 's', k);
        sent += k;
        return k;
    };
    r = c.send(post);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->status, 413);
    EXPECT_LT(sent, k_size);  // it stopped sending when the server closed
    EXPECT_EQ(bodies, 0);

    put.body = "small";  // the connection was not pooled: the next call works as ever
    r = c.send(put);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->body, "taken");
}

// A server that answers early (a 413) and then waits, neither reading the rest of the body nor
// closing: the client sees the answer while its write waits for room, stops sending and
// returns it, and closes the connection. It sat in its write until read_timeout (30 s here:
// the call would not have returned before the server's own wait ran out), then failed.
TEST_P(http_client_test, an_answer_before_the_whole_body_from_a_server_that_waits_is_the_calls) {
    constexpr size_t k_size = 32 << 20;  // far more than the sockets' buffers hold
    for (const bool streamed : {false, true}) {
        SCOPED_TRACE(streamed ? "streamed" : "whole");
        event answered, release, drained;
        std::atomic<bool> closed{false};
        uint16_t port = serve_raw([&](net::byte_stream& s) {
            std::string in;
            char buf[4096];
            while (in.find("\r\n\r\n") == std::string::npos) {  // the head, and nothing more
                auto n = s.read_some(buf, sizeof buf, 5s);
                if (!n || *n == 0) return;
                in.append(buf, *n);
            }
            std::string no = "HTTP/1.1 413 Content Too Large\r\nContent-Length: 8\r\n\r\ntoo long";
            (void)s.write_all(no.data(), no.size(), 5s);
            answered.set();
            (void)release.wait(60s);  // longer than the client's read_timeout
            for (;;) {  // the rest: what was in flight, then the client's close
                auto n = s.read_some(buf, sizeof buf, 5s);
                if (!n || *n == 0) {
                    closed = n.has_value() || n.error() == std::errc::connection_reset;
                    break;
                }
            }
            drained.set();
        });
        client c({.read_timeout = 30s});
        client_request q;
        q.method = method::put;
        q.url = "http://127.0.0.1:" + std::to_string(port) + "/upload";
        size_t sent = 0;
        if (streamed) {
            q.method = method::post;
            q.body_source = [&](char* b, size_t n) -> result<size_t> {
                size_t k = std::min(n, k_size - sent);
                std::memset(b, 's', k);
                sent += k;
                return k;
            };
        } else {
            q.body.assign(k_size, 'p');
        }
        auto r = c.send(q);
        release.set();
        ASSERT_TRUE(drained.wait(10s));  // (before any ASSERT: the server uses this frame)
        ASSERT_TRUE(r) << r.error().message();
        EXPECT_TRUE(answered.is_set());
        EXPECT_EQ(r->status, 413);
        EXPECT_EQ(r->body, "too long");
        EXPECT_EQ(c.statistics().retries, 0u);
        EXPECT_EQ(c.statistics().idle, 0u);  // not pooled: the server still waits for the body
        if (streamed) {
            EXPECT_LT(sent, k_size);  // it stopped sending
        }
        EXPECT_TRUE(closed);  // the client closed the connection
    }
}

// Interim answers that come while the body is still going up (a 100 Continue, asked for) are
// not the answer: the client drops them, sends the rest and returns the final one.
TEST_P(http_client_test, a_100_continue_during_a_large_upload_does_not_stop_it) {
    constexpr size_t k_size = 8 << 20;
    server_options o;
    o.max_body_bytes = k_size;
    std::string origin = serve(app().as_handler(), o);
    client c({.read_timeout = 30s});
    client_request q;
    q.method = method::post;
    q.url = origin + "/echo";
    q.headers = {{"Expect", "100-continue"}};
    q.body.assign(k_size, 'e');
    auto r = c.send(q);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body.size(), k_size);
    EXPECT_EQ(c.statistics().idle, 1u);  // whole, and kept
}

// One response object filled again and again (send(req, out)): each answer's fields, body and
// URL replace the last one's whole, with fewer or more fields than before.
TEST_P(http_client_test, a_response_passed_again_holds_only_the_latest_answer) {
    router r = app();
    r.get("/many", [](request&, response& res) {
        for (int i = 0; i < 6; ++i) res.header("X-Field-" + std::to_string(i), std::string(40, static_cast<char>('a' + i)));
        res.body("many");
    });
    std::string origin = serve(r.as_handler());
    client c;
    client_response out;
    client_request q;
    for (const char* path : {"/many", "/hello", "/hello", "/many", "/many", "/nowhere", "/hello"}) {
        q.url = origin + path;
        ASSERT_TRUE(c.send(q, out));
        const bool many = std::string_view(path) == "/many", missing = std::string_view(path) == "/nowhere";
        EXPECT_EQ(out.status, missing ? 404 : 200) << path;
        EXPECT_EQ(out.url, q.url);
        EXPECT_EQ(out.body_length, out.body.size());
        if (!missing) {
            EXPECT_EQ(out.body, many ? "many" : "hello") << path;
        }
        EXPECT_EQ(out.header("X-Field-5"), many ? std::string(40, 'f') : "") << path;
        size_t fields = 0;
        for (const auto& [k, v] : out.headers) fields += k.rfind("X-Field-", 0) == 0;
        EXPECT_EQ(fields, many ? 6u : 0u) << path;
        EXPECT_EQ(out.header("Content-Length"), std::to_string(out.body.size())) << path;
    }
    EXPECT_EQ(c.statistics().connections_opened, 1u);
}

// send(req, out, on_body): the body goes to the callback only, the rest into the reused response.
TEST_P(http_client_test, a_response_passed_again_with_a_body_callback_keeps_no_body) {
    router r = app();  // "/big" answers 100,000 bytes
    std::string origin = serve(r.as_handler());
    client c;
    client_response out;
    client_request q;
    for (const char* path : {"/big", "/hello", "/big"}) {
        q.url = origin + path;
        std::string got;
        ASSERT_TRUE(c.send(q, out, [&](std::string_view piece) {
            got.append(piece);
            return true;
        }));
        const size_t want = std::string_view(path) == "/big" ? 100'000 : 5;
        EXPECT_EQ(out.status, 200) << path;
        EXPECT_EQ(got.size(), want) << path;
        EXPECT_EQ(out.body_length, want) << path;
        EXPECT_TRUE(out.body.empty()) << path;
    }
    q.url = origin + "/big";
    EXPECT_EQ(c.send(q, out, [](std::string_view) { return false; }).error(), std::errc::operation_canceled);
    EXPECT_EQ(c.statistics().connections_opened, 1u);
    ASSERT_TRUE(c.send(q, out, [](std::string_view) { return true; }));
    EXPECT_EQ(out.body_length, 100'000u);
    EXPECT_EQ(c.statistics().connections_opened, 2u);  // the cancelled transfer closed its connection
}

// A kept-alive connection that the server closes while it idles in the pool: a request that may
// be retried takes it unchecked (no system call per reuse) and is sent again on a new one; a
// request that may not be retried is never sent on it.
TEST_P(http_client_test, a_pooled_connection_the_server_closed_costs_a_retry_or_a_check) {
    std::atomic<int> requests{0};
    event closed;
    uint16_t port = serve_raw([&](net::byte_stream& s) {
        char buf[4096];
        auto n = s.read_some(buf, sizeof buf, 5s);
        if (!n || *n == 0) return;
        ++requests;
        std::string ok = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";  // keep-alive, then gone
        (void)s.write_all(ok.data(), ok.size(), 5s);
        (void)s.close();
        closed.set();
    });
    std::string origin = "http://127.0.0.1:" + std::to_string(port);
    client c;
    auto r = c.get(origin + "/");
    ASSERT_TRUE(r) << r.error().message();
    ASSERT_TRUE(closed.wait(5s));
    EXPECT_EQ(c.statistics().idle, 1u);
    closed.reset();
    r = c.get(origin + "/");  // on the pooled connection, which fails unanswered: retried
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->body, "ok");
    EXPECT_EQ(c.statistics().connections_reused, 1u);
    EXPECT_EQ(c.statistics().retries, 1u);
    ASSERT_TRUE(closed.wait(5s));
    closed.reset();
    client_request post;
    post.method = method::post;
    post.url = origin + "/";
    post.body = "once";
    r = c.send(post);  // checked first: the closed connection is dropped, a new one opened
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->body, "ok");
    EXPECT_EQ(c.statistics().retries, 1u);
    EXPECT_EQ(c.statistics().connections_reused, 1u);
    EXPECT_EQ(c.statistics().connections_opened, 3u);
    EXPECT_EQ(requests.load(), 3);
}

TEST_P(http_client_test, read_timeout_and_body_limit_fail_clearly) {
    uint16_t silent = serve_raw([](net::byte_stream& s) {
        char buf[4096];
        (void)s.read_some(buf, sizeof buf, 5s);
        (void)s.read_some(buf, sizeof buf, 5s);  // never answers
    });
    client slow({.read_timeout = 100ms});
    EXPECT_EQ(slow.get("http://127.0.0.1:" + std::to_string(silent) + "/").error(), std::errc::timed_out);
    std::string origin = serve(app().as_handler());
    client small({.max_body_bytes = 1000});
    EXPECT_EQ(small.get(origin + "/big").error(), std::errc::message_size);
    client c;
    EXPECT_EQ(c.get("ftp://127.0.0.1/").error(), std::errc::invalid_argument);
    EXPECT_EQ(c.get("http://127.0.0.1:99999/").error(), std::errc::invalid_argument);
    client_request inj;
    inj.url = origin + "/hello";
    inj.headers = {{"X-Bad", "a\r\nInjected: 1"}};
    EXPECT_EQ(c.send(inj).error(), std::errc::invalid_argument);
    EXPECT_EQ(c.get(origin + "/a b").error(), std::errc::invalid_argument);
}

// read_timeout bounds each wait for the server to take more of a request body, not the whole
// upload: a slow but steady server gets a body that takes several read timeouts to send. The
// call's own timeout still bounds all of it.
TEST_P(http_client_test, a_slow_steady_server_gets_an_upload_that_outlasts_the_read_timeout) {
    constexpr size_t k_size = 32 << 20;  // far more than the sockets' buffers hold
    constexpr auto k_timeout = 400ms;    // as in the server's test of its send timeout
    server_options o;
    o.max_body_bytes = 64 << 20;
    std::string origin = serve([](request& req, response& res) {
        std::vector<char> buf(64 * 1024);
        uint64_t n = 0;
        for (;;) {  // a steady reader: 64 KiB, then a pause far shorter than the timeout
            auto k = req.read_body(buf.data(), buf.size());
            if (!k || *k == 0) break;
            n += *k;
            (void)this_fiber::sleep_for(3ms);
        }
        res.body(std::to_string(n));
    }, o);
    client c({.read_timeout = k_timeout, .retries = 0});
    client_request up;
    up.method = method::post;
    up.url = origin + "/upload";
    up.body.assign(k_size, 'u');
    const int64_t t0 = mono_now_ns();
    auto r = c.send(up);
    const int64_t took = mono_now_ns() - t0;
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->body, std::to_string(k_size));
    EXPECT_GT(took, 600'000'000) << "the upload must outlast the timeout to mean anything";

    up.timeout = 300ms;  // the call's limit ends the same upload early
    const int64_t t1 = mono_now_ns();
    EXPECT_EQ(c.send(up).error(), std::errc::timed_out);
    EXPECT_LT(mono_now_ns() - t1, 1'000'000'000);
}

// connect_timeout covers the TCP handshake (a listener whose accept queue is full drops the
// SYN) and the TLS one (a server that accepts and never answers the ClientHello).
TEST_P(http_client_test, connect_timeout_ends_a_handshake_that_never_completes) {
    test::loopback_listener full(0);
    int queued = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);  // fills the queue of one
    ASSERT_EQ(::connect(queued, full.sa(), sizeof full.addr), 0);
    client c({.connect_timeout = 100ms, .total_timeout = 10s, .retries = 0});
    const int64_t t0 = mono_now_ns();
    EXPECT_EQ(c.get("http://127.0.0.1:" + std::to_string(full.port()) + "/").error(), std::errc::timed_out);
    const int64_t took = mono_now_ns() - t0;
    EXPECT_GE(took, 100'000'000);
    EXPECT_LT(took, 900'000'000);  // before the SYN's first retransmission (1 s)
    ::close(queued);

    uint16_t mute = serve_raw([](net::byte_stream& s) {
        char buf[4096];
        (void)s.read_some(buf, sizeof buf, 5s);  // the ClientHello, never answered
        (void)s.read_some(buf, sizeof buf, 5s);
    });
    client tls({.connect_timeout = 100ms, .total_timeout = 10s, .retries = 0});
    const int64_t t1 = mono_now_ns();
    EXPECT_EQ(tls.get("https://127.0.0.1:" + std::to_string(mute) + "/").error(), std::errc::timed_out);
    EXPECT_LT(mono_now_ns() - t1, 2'000'000'000);
}

// A proxy that trickles its answer to CONNECT, a byte at a time, each well within any one
// read's timeout: connect_timeout and total_timeout still bound the whole of it.
TEST_P(http_client_test, a_proxy_trickling_its_connect_answer_is_bounded_by_the_timeouts) {
    uint16_t port = serve_raw([](net::byte_stream& s) {
        char buf[4096];
        if (!s.read_some(buf, sizeof buf, 5s)) return;
        const std::string start = "HTTP/1.1 200 Connection Established\r\nX-Slow: ";
        if (!s.write_all(start.data(), start.size(), 5s)) return;
        for (int i = 0; i < 200; ++i) {  // 10 s in all, unless the client leaves first
            if (!this_fiber::sleep_for(50ms) || !s.write_all("a", 1, 5s)) return;
        }
        (void)s.write_all("\r\n\r\n", 4, 5s);
    });
    const std::string proxy = "http://127.0.0.1:" + std::to_string(port);
    client by_total({.total_timeout = 300ms, .retries = 0, .proxy = proxy});
    client by_connect({.connect_timeout = 300ms, .total_timeout = 30s, .retries = 0, .proxy = proxy});
    for (client* c : {&by_total, &by_connect}) {
        const int64_t t0 = mono_now_ns();
        EXPECT_EQ(c->get("https://localhost:1/").error(), std::errc::timed_out);
        const int64_t took = mono_now_ns() - t0;
        EXPECT_GE(took, 250'000'000);
        EXPECT_LT(took, 2'000'000'000);
    }
}

TEST_P(http_client_test, reads_bodies_into_a_buffer_judges_heads_and_limits_one_call) {
    std::string origin = serve(app().as_handler());
    client c;
    std::string buf(100000, '\0');
    client_request q;
    q.url = origin + "/big";
    q.body_into = buf.data();
    q.body_into_size = buf.size();
    auto r = c.send(q);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->body_length, 100000u);
    EXPECT_TRUE(r->body.empty());
    EXPECT_EQ(buf, std::string(100000, 'b'));
    q.body_into_size = 99999;
    EXPECT_EQ(c.send(q).error(), std::errc::message_size);
    std::string streaming = serve([](request&, response& res) {
        for (int i = 0; i < 100; ++i)
            if (!res.write(std::string(1000, 'b'))) return;  // the client may hang up early
    });
    q.url = streaming + "/";  // no length known up front: checked piece by piece
    q.body_into_size = 50000;
    EXPECT_EQ(c.send(q).error(), std::errc::message_size);
    q.body_into_size = buf.size();
    r = c.send(q);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body_length, 100000u);
    EXPECT_EQ(buf.substr(1000, 3), "bbb");

    // on_head sees the status before the body; refusing it ends the call.
    int seen = 0;
    client_request h;
    h.url = origin + "/big";
    h.on_head = [&](const client_response& head) {
        seen = head.status;
        return false;
    };
    EXPECT_EQ(c.send(h).error(), std::errc::operation_canceled);
    EXPECT_EQ(seen, 200);
    h.on_head = [](const client_response& head) { return head.header("Content-Length") == "100000"; };
    r = c.send(h);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body.size(), 100000u);

    // A per-call timeout within the client's.
    uint16_t silent = serve_raw([](net::byte_stream& s) {
        char b[4096];
        (void)s.read_some(b, sizeof b, 5s);
        (void)s.read_some(b, sizeof b, 5s);
    });
    client_request slow;
    slow.url = "http://127.0.0.1:" + std::to_string(silent) + "/";
    slow.timeout = 100ms;
    auto t0 = mono_now_ns();
    EXPECT_EQ(c.send(slow).error(), std::errc::timed_out);
    EXPECT_LT(mono_now_ns() - t0, 4'000'000'000);
}

TEST_P(http_client_test, https_with_verification_and_a_connect_proxy) {
    using namespace net::tls_testing;
    server_options o;
    o.wrap = net::tls::server_wrap(server_ctx(), 5s);
    auto s = server::start(net::address::ipv4_loopback(0), app().as_handler(), o);
    ASSERT_TRUE(s);
    uint16_t port = (*s)->local_address().port();
    servers_.push_back(std::move(*s));
    auto trusting = client_ctx();
    client c({.tls = &trusting});
    auto r = c.get("https://localhost:" + std::to_string(port) + "/hello");
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->body, "hello");
    client untrusting;  // the system's CAs do not know the test CA
    EXPECT_FALSE(untrusting.get("https://localhost:" + std::to_string(port) + "/hello"));

    // A CONNECT proxy built on the server: the handler takes the connection over.
    std::atomic<int> tunnels{0};
    std::string proxy = serve([&](request& req, response& res) {
        if (req.method() != method::connect) return res.status(405);
        auto colon = req.target().rfind(':');
        auto up = net::connect(req.target().substr(0, colon),
                               static_cast<uint16_t>(std::stoi(std::string(req.target().substr(colon + 1)))), 5s);
        if (!up) return res.status(502);
        ++tunnels;
        res.detach();
        net::byte_stream& down = req.stream();
        const char ok[] = "HTTP/1.1 200 Connection Established\r\n\r\n";
        if (!down.write_all(ok, sizeof ok - 1, 5s)) return;
        auto pump = [](net::byte_stream& from, net::byte_stream& to) {
            char buf[16384];
            for (;;) {
                auto n = from.read_some(buf, sizeof buf, 5s);
                if (!n || *n == 0 || !to.write_all(buf, *n, 5s)) break;
            }
            (void)to.shutdown(1s);
        };
        auto f = spawn([&] { pump(*up, down); });
        pump(down, *up);
        if (f) (void)f->join();
    });
    client via({.tls = &trusting, .proxy = proxy});
    r = via.get("https://localhost:" + std::to_string(port) + "/hello");
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->body, "hello");
    EXPECT_EQ(tunnels.load(), 1);
}

// Against an independent server: nginx.
class http_client_nginx_test : public test::engine_test {
protected:
    static void SetUpTestSuite() {
        server_ = test::nginx::start(why_).release();
        if (!server_) return;
        std::ofstream(server_->www() + "/hello.txt") << "hello from nginx\n";
        std::string big(300000, 'n');
        std::ofstream(server_->www() + "/big.bin", std::ios::binary) << big;
    }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    void SetUp() override {
        GLUON_REQUIRE_PEER(server_, why_);
        test::engine_test::SetUp();
    }
    static inline test::nginx* server_ = nullptr;
    static inline std::string why_;
};

TEST_P(http_client_nginx_test, fetches_files_keeps_the_connection_and_reads_errors) {
    client c;
    auto r = c.get(server_->url("/hello.txt"));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "hello from nginx\n");
    EXPECT_EQ(r->header("Content-Type"), "text/plain");
    r = c.get(server_->url("/big.bin"));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, std::string(300000, 'n'));
    client_request head;
    head.method = method::head;
    head.url = server_->url("/big.bin");
    r = c.send(head);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->header("Content-Length"), "300000");
    EXPECT_TRUE(r->body.empty());
    client_request range;
    range.url = server_->url("/hello.txt");
    range.headers = {{"Range", "bytes=6-9"}};
    r = c.send(range);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 206);
    EXPECT_EQ(r->body, "from");
    r = c.get(server_->url("/missing"));
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404);
    EXPECT_EQ(c.statistics().connections_opened, 1u);  // every request on one kept-alive connection
}

GLUON_ENGINE_TEST_SUITE(http_client_nginx_test);

TEST_P(http_client_test, a_plain_http_proxy_gets_absolute_form_requests) {
    std::string origin = serve(app().as_handler());
    // A forward proxy built from the server and the client: it sees the absolute URL.
    std::vector<std::string> seen;
    std::string proxy = serve([&](request& req, response& res) {
        seen.emplace_back(req.target());
        client upstream;
        auto r = upstream.get(std::string(req.target()));
        if (!r) return res.status(502);
        res.status(r->status);
        res.body(r->body);
    });
    client c({.proxy = proxy});
    auto r = c.get(origin + "/hello");
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->body, "hello");
    ASSERT_EQ(seen.size(), 1u);
    EXPECT_EQ(seen[0], origin + "/hello");
}

TEST(http_url, parses_and_resolves) {
    auto u = url::parse("HTTPS://[::1]:8443/a/b?c=d#frag");
    ASSERT_TRUE(u);
    EXPECT_EQ(u->scheme, "https");
    EXPECT_EQ(u->host, "::1");
    EXPECT_EQ(u->port, 8443);
    EXPECT_EQ(u->target, "/a/b?c=d");
    EXPECT_EQ(u->authority(), "[::1]:8443");
    EXPECT_EQ(u->resolve("e")->target, "/a/e");
    EXPECT_EQ(u->resolve("/x")->to_string(), "https://[::1]:8443/x");
    EXPECT_EQ(u->resolve("//other/y")->to_string(), "https://other/y");
    // RFC 3986 5.2: a query-only reference keeps the path, dot segments go, the fragment is dropped.
    auto b = url::parse("http://a/b/c/d;p?q");
    ASSERT_TRUE(b);
    for (auto [ref, want] : std::initializer_list<std::pair<const char*, const char*>>{
             {"g", "http://a/b/c/g"},          {"./g", "http://a/b/c/g"},
             {"g/", "http://a/b/c/g/"},        {"/g", "http://a/g"},
             {"//g", "http://g/"},             {"?y", "http://a/b/c/d;p?y"},
             {"g?y", "http://a/b/c/g?y"},      {"#s", "http://a/b/c/d;p?q"},
             {"g#s", "http://a/b/c/g"},        {"g?y#s", "http://a/b/c/g?y"},
             {"", "http://a/b/c/d;p?q"},       {".", "http://a/b/c/"},
             {"./", "http://a/b/c/"},          {"..", "http://a/b/"},
             {"../", "http://a/b/"},           {"../g", "http://a/b/g"},
             {"../..", "http://a/"},           {"../../g", "http://a/g"},
             {"../../../g", "http://a/g"},     {"/./g", "http://a/g"},
             {"/../g", "http://a/g"},          {"g.", "http://a/b/c/g."},
             {"..g", "http://a/b/c/..g"},      {"./../g", "http://a/b/g"},
             {"g/./h", "http://a/b/c/g/h"},    {"g/../h", "http://a/b/c/h"},
             {"g?y/./x", "http://a/b/c/g?y/./x"}, {"/p?next=http://x/", "http://a/p?next=http://x/"},
             {"http://o/x/../y#f", "http://o/y"}, {"//o:81/../z?k", "http://o:81/z?k"}}) {
        auto r = b->resolve(ref);
        ASSERT_TRUE(r) << ref;
        EXPECT_EQ(r->to_string(), want) << ref;
    }
    EXPECT_FALSE(b->resolve("ftp://o/x"));
    EXPECT_EQ(url::parse("http://h")->target, "/");
    EXPECT_EQ(url::parse("http://h?q")->target, "/?q");
    for (const char* bad : {"h/x", "http://", "http://u@h/", "http://h:0/", "http://h:x/", "http://[::1/", "http://h/ a"})
        EXPECT_FALSE(url::parse(bad)) << bad;
}

GLUON_ENGINE_TEST_SUITE(http_client_test);

}  // namespace
}  // namespace gluon::http
