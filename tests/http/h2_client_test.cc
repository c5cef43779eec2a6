// The HTTP/2 client: against gluon's server (h2c by prior knowledge, h2 over TLS by ALPN) and
// against nginx with HTTP/2 on its listener, on every engine. Many fibers share one connection.
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "gluon/http/client.h"
#include "gluon/http/router.h"
#include "gluon/http/server.h"
#include "gluon/net/socket.h"
#include "gluon/net/tls.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sync/semaphore.h"
#include "net/tls_test_support.h"
#include "support/nginx.h"
#include "test_support.h"

namespace gluon::http {
namespace {

using namespace std::chrono_literals;

std::string pattern(size_t n) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('A' + (i * 17 + i / 9) % 26);
    return s;
}

class h2_client_test : public test::engine_test {
protected:
    void TearDown() override {
        srv_.reset();
        test::engine_test::TearDown();
    }
    void start(server_options o = {}) {
        r_.get("/hello", [](request& req, response& res) {
            res.body("hello over HTTP/" + std::to_string(req.version_major()));
        });
        r_.get("/big", [this](request&, response& res) { res.body(big_); });
        r_.post("/echo", [](request& req, response& res) {
            auto b = req.body();
            if (!b) return res.status(400);
            res.header("X-Length", std::to_string(b->size()));
            res.body(std::string(*b));
        });
        r_.get("/ua", [](request& req, response& res) { res.body(std::string(req.header("user-agent"))); });
        auto s = server::start(net::address::ipv4_loopback(0), r_.as_handler(), std::move(o));
        ASSERT_TRUE(s) << s.error().message();
        srv_ = std::move(*s);
    }
    std::string url(const std::string& path, const char* scheme = "http") const {
        return std::string(scheme) + "://localhost:" + std::to_string(srv_->local_address().port()) + path;
    }
    std::string big_ = pattern(500 * 1000);
    router r_;
    std::unique_ptr<server> srv_;
};

TEST_P(h2_client_test, prior_knowledge_carries_many_fibers_on_one_connection) {
    start();
    client_options o;
    o.http2_prior_knowledge = true;
    client c(o);
    auto r = c.get(url("/hello"));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "hello over HTTP/2");
    EXPECT_EQ(r->header("Content-Length"), "17");  // fields found case-insensitively
    EXPECT_EQ(c.get(url("/ua"))->body, "gluon");

    constexpr int k_fibers = 20;
    int ok = 0;
    wait_group wg;
    wg.add(k_fibers);
    std::vector<fiber> fs;
    for (int i = 0; i < k_fibers; ++i) {
        auto f = spawn([&, i] {
            client_request req;
            req.method = method::post;
            req.url = url("/echo");
            req.body = pattern(1000 + i * 5000);
            auto e = c.send(req);
            if (e && e->status == 200 && e->body == req.body && e->header("x-length") == std::to_string(req.body.size())) ++ok;
            auto b = c.get(url("/big"));
            if (b && b->body == big_) ++ok;
            wg.done();
        });
        ASSERT_TRUE(f);
        fs.push_back(std::move(*f));
    }
    ASSERT_TRUE(wg.wait(30s));
    for (auto& f : fs) ASSERT_TRUE(f.join());
    EXPECT_EQ(ok, 2 * k_fibers);
    auto st = c.statistics();
    EXPECT_EQ(st.connections_opened, 1u);
    EXPECT_EQ(st.http2_requests, 2u + 2 * k_fibers);
    EXPECT_EQ(srv_->connections(), 1u);
}

// The client keeps an HTTP/2 connection per origin and vCPU; destroying it ends them all, each
// on its own vCPU. Only the destroying vCPU's were closed: the others stayed open, with their
// fibers and buffers, until the server closed them.
TEST_P(h2_client_test, destroying_the_client_ends_its_http2_connections_on_every_vcpu) {
    start();
    auto rt = runtime::start(test::test_runtime(1, GetParam()));
    ASSERT_TRUE(rt) << rt.error().message();
    client_options o;
    o.http2_prior_knowledge = true;
    auto c = std::make_unique<client>(o);
    auto get = [&] {
        auto r = c->get(url("/hello"));
        return r && r->body == "hello over HTTP/2";
    };
    EXPECT_TRUE(get());  // this vCPU's connection
    auto other = (*rt)->call(0, get);  // the other vCPU's
    ASSERT_TRUE(other);
    EXPECT_TRUE(*other);
    EXPECT_EQ(srv_->connections(), 2u);
    c.reset();
    EXPECT_TRUE(test::eventually([&] { return srv_->connections() == 0; })) << srv_->connections();
}

TEST_P(h2_client_test, streamed_request_bodies_and_streamed_responses) {
    start();
    client_options o;
    o.http2_prior_knowledge = true;
    client c(o);
    client_request req;
    req.method = method::post;
    req.url = url("/echo");
    std::string sent = pattern(300 * 1000);
    size_t at = 0;
    req.body_source = [&](char* buf, size_t n) -> result<size_t> {
        size_t k = std::min(n, sent.size() - at);
        std::memcpy(buf, sent.data() + at, k);
        at += k;
        return k;
    };
    std::string got;
    auto r = c.send(req, [&](std::string_view piece) {
        got.append(piece);
        return true;
    });
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(got, sent);
    EXPECT_EQ(r->body_length, sent.size());  // counted though it went to on_body (it stayed 0)
    EXPECT_TRUE(r->body.empty());
    // A body over the limit stops the transfer.
    o.max_body_bytes = 1000;
    client small(o);
    auto big = small.get(url("/big"));
    ASSERT_FALSE(big);
    EXPECT_EQ(big.error(), std::errc::message_size);
}

// A redirect the call follows is not the caller's answer: over HTTP/2 as over HTTP/1.1, its
// body reaches neither on_body nor the caller's buffer (which it would overflow here).
TEST_P(h2_client_test, a_followed_redirects_body_is_not_handed_to_the_caller) {
    r_.get("/moved", [](request&, response& res) {
        res.status(302);
        res.header("Location", "/hello");
        res.body(std::string(100, 'm'));
    });
    start();
    client_options o;
    o.http2_prior_knowledge = true;
    client c(o);
    client_request q;
    q.url = url("/moved");
    std::string got;
    auto r = c.send(q, [&](std::string_view piece) {
        got.append(piece);
        return true;
    });
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(got, "hello over HTTP/2");
    EXPECT_EQ(r->body_length, 17u);  // the final answer's, not the redirect's 100 bytes
    EXPECT_EQ(c.statistics().http2_requests, 2u);
    std::string buf(64, '\0');
    q.body_into = buf.data();
    q.body_into_size = buf.size();
    r = c.send(q);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->body_length, 17u);
    EXPECT_EQ(buf.substr(0, 17), "hello over HTTP/2");
}

// A 3xx that is the call's answer (redirects off, or no Location to follow) has its body in
// out.body, as over HTTP/1.1, not in the caller's buffer: it went there, and overflowed this
// one (EMSGSIZE).
TEST_P(h2_client_test, a_redirect_not_followed_has_its_body_in_the_response_not_the_buffer) {
    r_.get("/moved", [](request&, response& res) {
        res.status(301);
        res.header("Location", "/hello");
        res.body(std::string(100, 'm'));
    });
    r_.get("/nowhere", [](request&, response& res) {
        res.status(300);  // no Location: nothing to follow
        res.body("pick one: /a or /b");
    });
    start();
    std::string buf(8, '-');  // smaller than either body
    client_request q;
    q.body_into = buf.data();
    q.body_into_size = buf.size();
    client no_follow({.max_redirects = 0, .http2_prior_knowledge = true});
    q.url = url("/moved");
    auto r = no_follow.send(q);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->status, 301);
    EXPECT_EQ(r->body, std::string(100, 'm'));
    EXPECT_EQ(r->body_length, 100u);
    EXPECT_EQ(buf, std::string(8, '-'));
    EXPECT_EQ(no_follow.statistics().http2_requests, 1u);
    client c({.http2_prior_knowledge = true});
    q.url = url("/nowhere");
    r = c.send(q);
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->status, 300);
    EXPECT_EQ(r->body, "pick one: /a or /b");
    EXPECT_EQ(r->body_length, r->body.size());
    EXPECT_EQ(buf, std::string(8, '-'));
    EXPECT_EQ(c.statistics().http2_requests, 1u);
}

TEST_P(h2_client_test, https_negotiates_h2_by_alpn) {
    net::tls::context_options so;
    so.alpn = {"h2", "http/1.1"};
    server_options o;
    o.wrap = net::tls::server_wrap(net::tls_testing::server_ctx(so), 10s);
    start(std::move(o));
    net::tls::context_options co;
    co.alpn = {"h2", "http/1.1"};
    auto ctx = net::tls_testing::client_ctx(co);
    client_options c2;
    c2.tls = &ctx;
    client c(c2);
    auto r = c.get(url("/hello", "https"));
    ASSERT_TRUE(r) << r.error().message() << " " << net::tls::last_error_message();
    EXPECT_EQ(r->body, "hello over HTTP/2");
    EXPECT_EQ(c.get(url("/big", "https"))->body, big_);
    EXPECT_EQ(c.statistics().http2_requests, 2u);
    // A context that offers only HTTP/1.1 gets HTTP/1.1 from the same server.
    net::tls::context_options h1;
    h1.alpn = {"http/1.1"};
    auto ctx1 = net::tls_testing::client_ctx(h1);
    client_options c1;
    c1.tls = &ctx1;
    client old(c1);
    EXPECT_EQ(old.get(url("/hello", "https"))->body, "hello over HTTP/1");
}

TEST_P(h2_client_test, a_server_that_goes_away_is_reconnected_to) {
    start();
    client_options o;
    o.http2_prior_knowledge = true;
    client c(o);
    ASSERT_TRUE(c.get(url("/hello")));
    auto port = srv_->local_address().port();
    srv_->stop(1s);
    srv_.reset();
    // The session sees the GOAWAY (or the close); a new server on the same port gets the next
    // request on a new connection.
    auto s = server::start(net::address::ipv4_loopback(port), r_.as_handler());
    ASSERT_TRUE(s) << s.error().message();
    srv_ = std::move(*s);
    result<client_response> r = errno_error(EPIPE);
    for (int i = 0; i < 3 && !r; ++i) r = c.get(url("/hello"));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->body, "hello over HTTP/2");
    EXPECT_EQ(c.statistics().connections_opened, 2u);
}

std::string h2_frame(uint8_t type, uint8_t flags, uint32_t stream, const std::string& payload) {
    size_t n = payload.size();
    std::string f{static_cast<char>(n >> 16),    static_cast<char>(n >> 8),      static_cast<char>(n),
                  static_cast<char>(type),       static_cast<char>(flags),       static_cast<char>(stream >> 24),
                  static_cast<char>(stream >> 16), static_cast<char>(stream >> 8), static_cast<char>(stream)};
    return f + payload;
}

// A server that answers the first request on its first connection with `frames` as soon as the
// request's HEADERS is in (after its own SETTINGS and the ACK of the client's, on stream 1),
// without reading the body or opening a window, then reads until the client goes.
void answer_once(net::listener& l, const std::string& frames) {
    auto s = l.accept(10s);
    ASSERT_TRUE(s);
    std::string in;
    char buf[16384];
    bool sent = false;
    for (;;) {
        auto n = s->read_some(buf, sizeof buf, 10s);
        if (!n || *n == 0) return;
        in.append(buf, *n);
        for (size_t at = 24; !sent && at + 9 <= in.size();) {  // past the preface, frame by frame
            size_t len = (size_t(uint8_t(in[at])) << 16) | (size_t(uint8_t(in[at + 1])) << 8) | uint8_t(in[at + 2]);
            if (at + 9 + len > in.size()) break;
            if (in[at + 3] == 1) {  // HEADERS
                std::string out = h2_frame(4, 0, 0, "") + h2_frame(4, 1, 0, "") + frames;
                ASSERT_TRUE(s->write_all(out.data(), out.size(), 10s));
                sent = true;
            }
            at += 9 + len;
        }
    }
}

// Answers with `block` (an HPACK header block) as the response's whole head (END_STREAM).
void answer_with_head(net::listener& l, const std::string& block) { answer_once(l, h2_frame(1, 4 | 1, 1, block)); }

// HPACK lets one byte stand for a whole field of the dynamic table (RFC 7541 6.1): a 12 KiB
// frame can carry 48 MB of fields. client_options::limits bounds a response head over HTTP/2
// as over HTTP/1.1.
TEST_P(h2_client_test, a_response_head_over_the_limits_is_refused_however_compressed) {
    auto l = net::listener::listen(net::address::ipv4_loopback(0));
    ASSERT_TRUE(l) << l.error().message();
    std::string block = "\x88";  // :status 200 (static table)
    block += "\x40\x05x-big";    // a literal with incremental indexing, new name
    block += "\x7f\xa1\x1e";    // a value of 4000 bytes (RFC 7541 5.1)
    block += std::string(4000, 'b');
    block += std::string(12000, '\xbe');  // index 62: that field again, 12000 times
    auto srv = spawn([&] { answer_with_head(*l, block); });
    ASSERT_TRUE(srv);
    {
        client_options o;
        o.http2_prior_knowledge = true;
        client c(o);
        auto r = c.get("http://127.0.0.1:" + std::to_string(l->local_address()->port()) + "/");
        ASSERT_FALSE(r) << r->headers.size() << " fields";
        EXPECT_EQ(r.error(), std::errc::protocol_error);
    }
    ASSERT_TRUE(srv->join());
}

// Answers stream 1 with `head` and ends its side of the connection in the same turn, then
// reads until the client resets stream 1 (true) or goes.
bool answer_then_end(net::listener& l, const std::string& head) {
    auto s = l.accept(10s);
    if (!s) return false;
    std::string in;
    char buf[16384];
    bool sent = false;
    for (;;) {
        auto n = s->read_some(buf, sizeof buf, 10s);
        if (!n || *n == 0) return false;
        in.append(buf, *n);
        for (size_t at = 24; at + 9 <= in.size();) {  // past the preface, frame by frame
            size_t len = (size_t(uint8_t(in[at])) << 16) | (size_t(uint8_t(in[at + 1])) << 8) | uint8_t(in[at + 2]);
            if (at + 9 + len > in.size()) break;
            if (sent && in[at + 3] == 3 && in[at + 8] == 1) return true;  // RST_STREAM on stream 1
            if (!sent && in[at + 3] == 1) {  // the request's HEADERS
                std::string out = h2_frame(4, 0, 0, "") + h2_frame(4, 1, 0, "") + h2_frame(1, 4 | 1, 1, head);
                if (!s->write_all(out.data(), out.size(), 10s)) return false;
                ::shutdown(s->get(), SHUT_WR);
                sent = true;
            }
            at += 9 + len;
        }
    }
}

// Overwrites the stack below the caller's frame, where the frames of the calls it made were.
[[gnu::noinline]] void scribble_stack() {
    volatile char junk[64 * 1024];
    for (size_t i = 0; i < sizeof junk; ++i) junk[i] = static_cast<char>(0xff);
}

// A head over the limits and the end of the connection in one read: the session ends while
// the RST_STREAM nghttp2 queued for that head is still unsent, and the call fails at once
// (EPROTO) and is destroyed. The writer's last flush then sends the reset, which closes the
// stream: nghttp2 still held the dead call (on the caller's stack) as the stream's data, and
// its close wrote there (on epoll, whose read sees the end without waiting, a crash).
TEST_P(h2_client_test, a_call_the_connection_ended_is_not_touched_once_it_returned) {
    auto l = net::listener::listen(net::address::ipv4_loopback(0));
    ASSERT_TRUE(l) << l.error().message();
    std::string head = "\x88";  // :status 200
    head += "\x40\x05x-big\x7f\xd1\x0e";  // a literal field of 2000 bytes (RFC 7541 5.1)
    head += std::string(2000, 'b');
    bool reset = false;
    auto srv = spawn([&] { reset = answer_then_end(*l, head); });
    ASSERT_TRUE(srv);
    {
        client_options o;
        o.http2_prior_knowledge = true;
        o.retries = 0;
        o.limits.max_head_bytes = 1024;
        client c(o);
        auto r = c.get("http://127.0.0.1:" + std::to_string(l->local_address()->port()) + "/");
        ASSERT_FALSE(r);
        EXPECT_EQ(r.error(), std::errc::protocol_error) << r.error().message();
        scribble_stack();
        ASSERT_TRUE(srv->join());  // until the reset has been sent
    }
    EXPECT_TRUE(reset);
}

// A server that opens its windows (the connection's and stream 1's) by one byte every 50 ms,
// for 5 s or until the client goes.
void open_window_a_byte_at_a_time(net::listener& l) {
    auto s = l.accept(10s);
    ASSERT_TRUE(s);
    std::string out = h2_frame(4, 0, 0, "") + h2_frame(4, 1, 0, "");
    ASSERT_TRUE(s->write_all(out.data(), out.size(), 10s));
    const std::string one{0, 0, 0, 1};
    const std::string tick = h2_frame(8, 0, 0, one) + h2_frame(8, 0, 1, one);
    char buf[16384];
    for (int i = 0; i < 100; ++i) {
        // The hostile peer's pace (each tick well within the client's timeout), reading what
        // comes meanwhile.
        const auto next = std::chrono::steady_clock::now() + 50ms;
        for (auto now = std::chrono::steady_clock::now(); now < next; now = std::chrono::steady_clock::now()) {
            auto n = s->read_some(buf, sizeof buf, next - now);
            if (n && *n == 0) return;
            if (!n && n.error() != std::errc::timed_out) return;
        }
        if (!s->write_all(tick.data(), tick.size(), 10s)) return;
    }
}

// POSTs, over HTTP/2 by prior knowledge, a body more than the server's windows and the
// client's queue take (so its write waits for window) to the raw server on l.
result<client_response> post_large_body(net::listener& l, duration timeout) {
    client_options o;
    o.http2_prior_knowledge = true;
    client c(o);
    client_request req;
    req.method = method::post;
    req.url = "http://127.0.0.1:" + std::to_string(l.local_address()->port()) + "/";
    req.body = pattern(65535 + 65536 + 1000);  // the initial windows, the queue, and more
    req.timeout = timeout;
    return c.send(req);
}

// A request body the server's window lets through a byte at a time: each wait for window
// ends with progress, but the request's timeout still bounds the whole write. Each wait got
// the whole timeout again, so the call lasted as long as the server went on (5 s here; for
// good with a server that never stops), and so did a gRPC call's write past its deadline.
TEST_P(h2_client_test, a_window_opened_a_byte_at_a_time_does_not_stretch_the_timeout) {
    auto l = net::listener::listen(net::address::ipv4_loopback(0));
    ASSERT_TRUE(l) << l.error().message();
    auto srv = spawn([&] { open_window_a_byte_at_a_time(*l); });
    ASSERT_TRUE(srv);
    {
        auto t0 = std::chrono::steady_clock::now();
        auto r = post_large_body(*l, 300ms);
        auto took = std::chrono::steady_clock::now() - t0;
        ASSERT_FALSE(r);
        EXPECT_EQ(r.error(), std::errc::timed_out);
        EXPECT_LT(took, 3s);
    }
    ASSERT_TRUE(srv->join());
}

// Answers 200 "early" as soon as the request's head is in, then asks for the rest of the
// request not to be sent (RST_STREAM NO_ERROR, RFC 9113 8.1). With `whole` false the DATA frame
// does not end the answer: the reset cuts it short.
void answer_early_then_reset(net::listener& l, bool whole = true) {
    answer_once(l, h2_frame(1, 4, 1, "\x88") + h2_frame(0, whole ? 1 : 0, 1, "early") +
                       h2_frame(3, 0, 1, std::string(4, '\0')));
}

// The request's body is more than the server's windows and the client's queue take, so its
// write waits when the reset comes. The reset woke that wait without ending it, and the next
// wait lasted the whole timeout: the request failed with ETIMEDOUT (or ECONNRESET, had the
// reset come first) instead of returning the answer.
TEST_P(h2_client_test, an_answer_before_the_request_body_ends_stands_after_a_no_error_reset) {
    auto l = net::listener::listen(net::address::ipv4_loopback(0));
    ASSERT_TRUE(l) << l.error().message();
    auto srv = spawn([&] { answer_early_then_reset(*l); });
    ASSERT_TRUE(srv);
    {
        auto r = post_large_body(*l, 5s);
        ASSERT_TRUE(r) << r.error().message();
        EXPECT_EQ(r->status, 200);
        EXPECT_EQ(r->body, "early");
    }
    ASSERT_TRUE(srv->join());
}

// A NO_ERROR reset stands for the rest of the request only after a whole answer (END_STREAM):
// one that cuts the answer short fails the request, whose body would otherwise be a piece of
// the answer passed off as all of it.
TEST_P(h2_client_test, an_answer_cut_short_by_a_no_error_reset_fails) {
    auto l = net::listener::listen(net::address::ipv4_loopback(0));
    ASSERT_TRUE(l) << l.error().message();
    auto srv = spawn([&] { answer_early_then_reset(*l, false); });
    ASSERT_TRUE(srv);
    {
        auto r = post_large_body(*l, 5s);
        EXPECT_FALSE(r) << "a cut answer was taken whole: " << (r ? r->body : "");
        if (!r) {
            EXPECT_EQ(r.error(), std::errc::connection_reset) << r.error().message();
        }
    }
    ASSERT_TRUE(srv->join());
}

// One client connection seen by a raw server: the client's frames one by one, past its preface.
struct raw_h2_peer {
    struct frame {
        uint8_t type = 0, flags = 0;
        uint32_t stream = 0;
        std::string payload;
    };
    net::stream s;
    std::string in;
    size_t at = 24;  // the client's preface

    /// The client's next frame; nullopt at its end, or when none came within timeout.
    std::optional<frame> next(duration timeout) {
        for (;;) {
            if (at + 9 <= in.size()) {
                size_t len = (size_t(uint8_t(in[at])) << 16) | (size_t(uint8_t(in[at + 1])) << 8) | uint8_t(in[at + 2]);
                if (at + 9 + len <= in.size()) {
                    frame f;
                    f.type = uint8_t(in[at + 3]);
                    f.flags = uint8_t(in[at + 4]);
                    f.stream = (uint32_t(uint8_t(in[at + 5]) & 0x7f) << 24) | (uint32_t(uint8_t(in[at + 6])) << 16) |
                               (uint32_t(uint8_t(in[at + 7])) << 8) | uint8_t(in[at + 8]);
                    f.payload = in.substr(at + 9, len);
                    at += 9 + len;
                    return f;
                }
            }
            char buf[16384];
            auto n = s.read_some(buf, sizeof buf, timeout);
            if (!n || *n == 0) return std::nullopt;
            in.append(buf, *n);
        }
    }
    bool send(const std::string& bytes) { return s.write_all(bytes.data(), bytes.size(), 10s).has_value(); }
};

// Accepts a client and sends it an empty SETTINGS frame.
std::optional<raw_h2_peer> accept_h2(net::listener& l) {
    auto s = l.accept(10s);
    if (!s) return std::nullopt;
    raw_h2_peer p{std::move(*s)};
    if (!p.send(h2_frame(4, 0, 0, ""))) return std::nullopt;
    return p;
}

std::string be32(uint32_t v) {
    return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8), static_cast<char>(v)};
}

// What a raw server got of a request body on each of its connections.
struct bodies_seen {
    std::string refused;  // on the connection whose GOAWAY left the request out
    std::string served;   // on the next one, up to END_STREAM
    bool ended = false;
};

// Answers the first connection's first request with GOAWAY naming stream 0 as the last it
// processes (so none), reading what the client still sends; serves the second connection's
// first request with 200.
void refuse_then_serve(net::listener& l, bodies_seen& seen) {
    auto first = accept_h2(l);
    ASSERT_TRUE(first);
    bool away = false;
    while (auto f = first->next(10s)) {
        if (f->type == 4 && !(f->flags & 1)) {
            ASSERT_TRUE(first->send(h2_frame(4, 1, 0, "")));
        }
        if (f->type == 1 && !away) {
            ASSERT_TRUE(first->send(h2_frame(7, 0, 0, be32(0) + be32(0))));  // GOAWAY, NO_ERROR
            away = true;
        }
        if (f->type == 0) seen.refused += f->payload;
    }
    auto second = accept_h2(l);
    ASSERT_TRUE(second);
    while (auto f = second->next(10s)) {
        if (f->type == 4 && !(f->flags & 1)) {
            ASSERT_TRUE(second->send(h2_frame(4, 1, 0, "")));
        }
        if (f->type == 0) seen.served += f->payload;
        if ((f->type == 0 || f->type == 1) && (f->flags & 1)) {
            seen.ended = true;
            ASSERT_TRUE(second->send(h2_frame(1, 4 | 1, f->stream, "\x88")));  // 200, no body
        }
    }
}

// A stream above a GOAWAY's last-stream-id was not processed (RFC 9113 6.8, 8.7): the request
// may go again on a new connection whatever its method. Only idempotent ones went again, and a
// POST failed with ECONNRESET.
TEST_P(h2_client_test, a_post_left_out_by_goaway_is_sent_again_on_a_new_connection) {
    auto l = net::listener::listen(net::address::ipv4_loopback(0));
    ASSERT_TRUE(l) << l.error().message();
    bodies_seen seen;
    auto srv = spawn([&] { refuse_then_serve(*l, seen); });
    ASSERT_TRUE(srv);
    client_request req;
    req.method = method::post;
    req.url = "http://127.0.0.1:" + std::to_string(l->local_address()->port()) + "/";
    req.body = pattern(5000);
    {
        client c({.http2_prior_knowledge = true});
        auto r = c.send(req);
        EXPECT_TRUE(r) << r.error().message();  // the server fiber still waits for a second go
        if (r) {
            EXPECT_EQ(r->status, 200);
        }
        EXPECT_EQ(c.statistics().connections_opened, 2u);
        EXPECT_EQ(c.statistics().retries, 1u);
    }
    ASSERT_TRUE(srv->join());
    EXPECT_TRUE(seen.ended);
    EXPECT_EQ(seen.served, req.body);  // whole, once
    EXPECT_EQ(seen.refused, req.body.substr(0, seen.refused.size()));  // at most a first go
}

// Reads the first connection's request and then says nothing more, not even to PINGs, reading
// until the client goes (`pinged`: a PING came meanwhile); serves the second connection's first
// request with 200.
void go_silent_then_serve(net::listener& l, bool& pinged) {
    auto first = accept_h2(l);
    ASSERT_TRUE(first);
    bool silent = false;
    while (auto f = first->next(10s)) {
        if (f->type == 4 && !(f->flags & 1) && !silent) {
            ASSERT_TRUE(first->send(h2_frame(4, 1, 0, "")));
        }
        if (f->type == 1) silent = true;
        if (f->type == 6 && !(f->flags & 1)) pinged = true;
    }
    auto second = accept_h2(l);
    ASSERT_TRUE(second);
    while (auto f = second->next(10s)) {
        if (f->type == 4 && !(f->flags & 1)) {
            ASSERT_TRUE(second->send(h2_frame(4, 1, 0, "")));
        }
        if (f->type == 1) {
            ASSERT_TRUE(second->send(h2_frame(1, 4 | 1, f->stream, "\x88")));  // 200, no body
        }
    }
}

// A server that stops answering without closing: a call that has waited http2_ping_after with
// nothing coming sends a PING, and a PING left unanswered ends the connection. The call waited
// for read_timeout, and the connection, still taken for usable, held every later call as long.
TEST_P(h2_client_test, a_server_that_goes_silent_is_pinged_and_dropped) {
    auto l = net::listener::listen(net::address::ipv4_loopback(0));
    ASSERT_TRUE(l) << l.error().message();
    bool pinged = false;
    auto srv = spawn([&] { go_silent_then_serve(*l, pinged); });
    ASSERT_TRUE(srv);
    {
        client_options o;
        o.http2_prior_knowledge = true;
        o.read_timeout = 8s;
        o.http2_ping_after = 100ms;
        o.http2_ping_timeout = 200ms;
        client c(o);
        const std::string u = "http://127.0.0.1:" + std::to_string(l->local_address()->port()) + "/";
        auto t0 = std::chrono::steady_clock::now();
        auto r = c.get(u);
        auto took = std::chrono::steady_clock::now() - t0;
        EXPECT_FALSE(r);
        if (!r) {
            EXPECT_EQ(r.error(), std::errc::timed_out) << r.error().message();
        }
        EXPECT_LT(took, 4s);  // half the read timeout
        auto next = c.get(u);  // on a new connection
        EXPECT_TRUE(next) << next.error().message();
        EXPECT_EQ(c.statistics().connections_opened, 2u);
    }
    ASSERT_TRUE(srv->join());
    EXPECT_TRUE(pinged);
}

// A server slow to answer but alive answers the PINGs: its connection stays, and the call gets
// its answer.
TEST_P(h2_client_test, a_slow_server_that_answers_pings_keeps_its_connection) {
    r_.get("/slow", [](request&, response& res) {
        (void)this_fiber::sleep_for(700ms);  // a slow handler, several PING periods long
        res.body("slow");
    });
    start();
    client_options o;
    o.http2_prior_knowledge = true;
    o.http2_ping_after = 100ms;
    o.http2_ping_timeout = 200ms;
    client c(o);
    auto r = c.get(url("/slow"));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->body, "slow");
    EXPECT_TRUE(c.get(url("/hello")));
    EXPECT_EQ(c.statistics().connections_opened, 1u);
    EXPECT_EQ(srv_->connections(), 1u);
}

TEST_P(h2_client_test, against_nginx_with_http2) {
    std::string why;
    auto ngx = test::nginx::start(why, "", " http2");
    GLUON_REQUIRE_PEER(ngx, why);
    std::string body = pattern(200 * 1000);
    std::ofstream(ngx->www() + "/f.bin", std::ios::binary) << body;
    client_options o;
    o.http2_prior_knowledge = true;
    client c(o);
    auto r = c.get(ngx->url("/f.bin"));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, body);
    auto missing = c.get(ngx->url("/missing"));
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->status, 404);
    client_request head;
    head.method = method::head;
    head.url = ngx->url("/f.bin");
    auto h = c.send(head);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->header("content-length"), std::to_string(body.size()));
    EXPECT_TRUE(h->body.empty());
    EXPECT_EQ(c.statistics().http2_requests, 3u);
    EXPECT_EQ(c.statistics().connections_opened, 1u);
}

GLUON_ENGINE_TEST_SUITE(h2_client_test);

}  // namespace
}  // namespace gluon::http
