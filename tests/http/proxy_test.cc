// The reverse and forward proxies on every engine, between real peers: curl as the client, and
// as upstreams gluon's own server, nginx, and a raw socket for the failures (an upstream that
// never answers, or resets mid-body).
#include "gluon/http/proxy.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>
#include <string>
#include <vector>

#include "gluon/http/client.h"
#include "gluon/http/router.h"
#include "gluon/http/server.h"
#include "gluon/net/tls.h"
#include "gluon/runtime/fiber.h"
#include "http/client_support.h"
#include "net/tls_test_support.h"
#include "support/nginx.h"
#include "support/process.h"
#include "test_support.h"

namespace gluon::http {
namespace {

using namespace std::chrono_literals;
using net::tls_testing::certs;
using net::tls_testing::read_file;
using net::tls_testing::write_file;

bool have(const char* tool) { return !test::find_program(tool).empty(); }

std::string pattern(size_t n) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 131 + i / 7) % 26);
    return s;
}

/// An upstream on a raw socket: on each connection it reads one request head (the last is kept)
/// and answers with `reply`'s bytes, then closes (resets if `reset`). An empty reply never answers.
struct raw_upstream {
    net::listener l;
    fiber f;
    std::string request;
    std::string reply;
    bool reset = false;
    int served = 0;
    int closed = 0;  // connections it answered and closed

    void start() {
        auto s = net::listener::listen(net::address::ipv4_loopback(0));
        ASSERT_TRUE(s);
        l = std::move(*s);
        auto fb = spawn([this] {
            for (;;) {
                auto c = l.accept();
                if (!c) return;
                std::string got;
                char buf[4096];
                while (got.find("\r\n\r\n") == std::string::npos) {
                    auto n = c->read_some(buf, sizeof buf, 10s);
                    if (!n || *n == 0) break;
                    got.append(buf, *n);
                }
                request = got;
                ++served;
                if (reply.empty()) {  // never answers: waits for the proxy to give up
                    if (!c->read_some(buf, sizeof buf, 10s)) return;
                    continue;
                }
                (void)c->write_all(reply.data(), reply.size(), 5s);
                if (reset) (void)c->set_linger(true, 0);
                (void)c->close();
                ++closed;
            }
        });
        ASSERT_TRUE(fb);
        f = std::move(*fb);
    }
    uint16_t port() const { return l.local_address()->port(); }
    std::string addr() const { return "127.0.0.1:" + std::to_string(port()); }
    ~raw_upstream() {
        if (f.joinable()) {
            (void)f.interrupt();
            (void)f.join();
        }
    }
};

struct curl_result {
    int status = -1;
    std::string out, err;
};

class proxy_test : public test::engine_test {
protected:
    void SetUp() override {
        test::engine_test::SetUp();
        if (IsSkipped()) return;
        dir_ = certs().dir + "/proxy-" + std::to_string(::getpid()) + "-" + engine::kind_name(GetParam());
        std::filesystem::create_directories(dir_);
    }
    void TearDown() override {
        proxy_.reset();
        upstream_.reset();
        std::filesystem::remove_all(dir_);
        test::engine_test::TearDown();
    }
    /// gluon's server as the upstream: echoes the request's fields, sums bodies, sends big ones.
    void start_upstream() {
        r_.get("/fields", [](request& req, response& res) {
            std::string s;
            for (const auto& f : req.headers()) s += std::string(f.name) + ": " + std::string(f.value) + "\n";
            res.body(s);
        });
        r_.get("/big", [this](request&, response& res) { res.body(big_); });
        r_.get("/streamed", [this](request&, response& res) {
            for (size_t i = 0; i < big_.size(); i += 10000)
                if (!res.write(std::string_view(big_).substr(i, 10000))) return;
        });
        r_.get("/peer", [this](request& req, response& res) {
            peers_.insert(req.stream().socket()->peer_address()->to_string());
            res.body("ok");
        });
        r_.post("/sum", [](request& req, response& res) {
            uint64_t n = 0, sum = 0;
            char buf[7000];
            for (;;) {
                auto k = req.read_body(buf, sizeof buf);
                if (!k) return res.status(400);
                if (*k == 0) break;
                for (size_t i = 0; i < *k; ++i) sum = sum * 31 + static_cast<unsigned char>(buf[i]);
                n += *k;
            }
            res.body(std::to_string(n) + " " + std::to_string(sum) + " " + std::string(req.header("transfer-encoding")));
        });
        server_options o;
        o.max_body_bytes = 64 << 20;
        auto s = server::start(net::address::ipv4_loopback(0), r_.as_handler(), o);
        ASSERT_TRUE(s) << s.error().message();
        upstream_ = std::move(*s);
    }
    void start_proxy(handler h) {
        server_options o;
        o.max_body_bytes = 64 << 20;
        auto s = server::start(net::address::ipv4_loopback(0), std::move(h), o);
        ASSERT_TRUE(s) << s.error().message();
        proxy_ = std::move(*s);
    }
    void start_reverse(std::vector<std::string> ups, proxy_options o = {}) {
        o.upstreams = std::move(ups);
        start_proxy(reverse_proxy(std::move(o)));
    }
    std::string upstream_addr() const { return "127.0.0.1:" + std::to_string(upstream_->local_address().port()); }
    std::string proxy_url(const std::string& path) const {
        return "http://127.0.0.1:" + std::to_string(proxy_->local_address().port()) + path;
    }
    curl_result curl(std::vector<std::string> more) {
        std::vector<std::string> a = {"curl", "-sS", "--max-time", "30"};
        a.insert(a.end(), more.begin(), more.end());
        test::child c(std::move(a), "/dev/null", dir_ + "/out");
        EXPECT_TRUE(c.started());
        curl_result r;
        r.status = c.wait(60s);
        r.out = read_file(dir_ + "/out");
        r.err = read_file(dir_ + "/out.err");
        return r;
    }
    std::string sum_of(const std::string& s) {
        uint64_t sum = 0;
        for (unsigned char ch : s) sum = sum * 31 + ch;
        return std::to_string(s.size()) + " " + std::to_string(sum);
    }

    std::string dir_;
    std::string big_ = pattern(3 << 20);
    std::set<std::string> peers_;
    router r_;
    std::unique_ptr<server> upstream_, proxy_;
};

TEST_P(proxy_test, appends_x_forwarded_for_and_strips_hop_by_hop_fields_both_ways) {
    GLUON_REQUIRE_PEER(have("curl"), "no curl command");
    raw_upstream up;
    up.reply = "HTTP/1.1 200 OK\r\nConnection: X-Hop\r\nX-Hop: secret\r\nKeep-Alive: timeout=5\r\n"
               "X-End: kept\r\nContent-Length: 2\r\n\r\nok";
    up.start();
    start_reverse({up.addr()});
    auto r = curl({"-D", "-", "-H", "X-Forwarded-For: 203.0.113.7", "-H", "Connection: X-Private",
                   "-H", "X-Private: 1", "-H", "TE: trailers", "-H", "Proxy-Authorization: Basic eA==",
                   "-H", "X-Kept: yes", proxy_url("/a/b?c=d")});
    ASSERT_EQ(r.status, 0) << r.err;
    ASSERT_EQ(up.served, 1);
    const std::string& q = up.request;
    EXPECT_EQ(q.rfind("GET /a/b?c=d HTTP/1.1\r\n", 0), 0u) << q;
    EXPECT_NE(q.find("\r\nHost: 127.0.0.1:" + std::to_string(proxy_->local_address().port()) + "\r\n"),
              std::string::npos) << q;
    EXPECT_NE(q.find("\r\nX-Forwarded-For: 203.0.113.7, 127.0.0.1\r\n"), std::string::npos) << q;
    EXPECT_NE(q.find("\r\nX-Forwarded-Proto: http\r\n"), std::string::npos) << q;
    EXPECT_NE(q.find("\r\nX-Kept: yes\r\n"), std::string::npos) << q;
    for (const char* gone : {"X-Private", "TE:", "Proxy-Authorization", "Connection"})
        EXPECT_EQ(q.find(gone), std::string::npos) << gone << " in\n" << q;
    EXPECT_NE(r.out.find("X-End: kept\r\n"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("X-Hop"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("Keep-Alive"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.substr(r.out.size() - 2), "ok");
}

TEST_P(proxy_test, streams_large_bodies_both_ways_over_http1_and_http2) {
    GLUON_REQUIRE_PEER(have("curl"), "no curl command");
    start_upstream();
    start_reverse({upstream_addr()});
    std::string upload = pattern((2 << 20) + 12345);
    write_file(dir_ + "/upload", upload);
    for (const char* version : {"--http1.1", "--http2-prior-knowledge"}) {
        SCOPED_TRACE(version);
        auto got = curl({version, proxy_url("/big")});
        ASSERT_EQ(got.status, 0) << got.err;
        EXPECT_TRUE(got.out == big_) << got.out.size();
        got = curl({version, proxy_url("/streamed")});
        ASSERT_EQ(got.status, 0) << got.err;
        EXPECT_TRUE(got.out == big_) << got.out.size();
        // Content-Length upload, and a chunked one (HTTP/1.1) or one without a length (HTTP/2).
        got = curl({version, "--data-binary", "@" + dir_ + "/upload", proxy_url("/sum")});
        EXPECT_EQ(got.out, sum_of(upload) + " ") << got.err;
        got = curl({version, "-H", "Transfer-Encoding: chunked", "-H", "Content-Length:", "--data-binary",
                    "@" + dir_ + "/upload", proxy_url("/sum")});
        // Over HTTP/2 the request has no length either: it goes upstream chunked too.
        EXPECT_EQ(got.out, sum_of(upload) + " chunked") << got.err;
    }
}

// The proxy's send timeouts bound each wait between two writes, not a whole write: a slow but
// steady reader gets a large body that takes several timeouts, downstream (a client reading
// the upstream's answer) and upstream (an upstream reading the client's upload, sent up in
// pieces of up to buffer_bytes, here as large as the HTTP/2 stream window lets them grow).
TEST_P(proxy_test, slow_steady_readers_get_bodies_that_outlast_the_send_timeouts) {
    GLUON_REQUIRE_PEER(have("curl"), "no curl command");
    constexpr auto k_timeout = 400ms;  // as in the server's own test of its send timeout
    constexpr size_t k_down = 16 << 20, k_up = 60 << 20;
    auto steady_pause = [] { (void)this_fiber::sleep_for(2ms); };  // after each 64 KiB read
    r_.get("/huge", [](request&, response& res) { res.body(std::string(k_down, 'h')); });
    r_.post("/slow_sum", [steady_pause](request& req, response& res) {
        uint64_t n = 0, sum = 0;
        std::vector<char> buf(64 * 1024);
        for (;;) {
            auto k = req.read_body(buf.data(), buf.size());
            if (!k) return res.status(400);
            if (*k == 0) break;
            for (size_t i = 0; i < *k; ++i) sum = sum * 31 + static_cast<unsigned char>(buf[i]);
            n += *k;
            steady_pause();
        }
        res.body(std::to_string(n) + " " + std::to_string(sum));
    });
    start_upstream();
    proxy_options po;
    po.upstreams = {upstream_addr()};
    po.send_timeout = k_timeout;
    po.buffer_bytes = 32 << 20;
    server_options so;
    so.max_body_bytes = 64 << 20;
    so.send_timeout = k_timeout;  // the proxy's writes to its client are its server's
    so.h2_stream_window = 32 << 20;
    so.h2_connection_window = 64 << 20;
    auto s = server::start(net::address::ipv4_loopback(0), reverse_proxy(po), so);
    ASSERT_TRUE(s) << s.error().message();
    proxy_ = std::move(*s);

    auto c = net::stream::connect(proxy_->local_address(), 5s);
    ASSERT_TRUE(c);
    const std::string get = "GET /huge HTTP/1.1\r\nHost: t\r\n\r\n";
    ASSERT_TRUE(c->write_all(get.data(), get.size(), 5s));
    auto t0 = std::chrono::steady_clock::now();
    size_t got = 0;
    std::vector<char> buf(64 * 1024);
    while (got < k_down) {  // (the head's bytes count too: enough to have the whole body)
        auto n = c->read_some(buf.data(), buf.size(), 5s);
        if (!n || *n == 0) break;
        got += *n;
        steady_pause();
    }
    EXPECT_GE(got, k_down);
    EXPECT_GT(std::chrono::steady_clock::now() - t0, 3 * k_timeout / 2)
        << "the download must outlast the timeout to mean anything";

    std::string upload = pattern(k_up);
    write_file(dir_ + "/upload", upload);
    t0 = std::chrono::steady_clock::now();
    auto r = curl({"--http2-prior-knowledge", "--data-binary", "@" + dir_ + "/upload", proxy_url("/slow_sum")});
    EXPECT_EQ(r.out, sum_of(upload)) << r.err;
    EXPECT_GT(std::chrono::steady_clock::now() - t0, 3 * k_timeout / 2)
        << "the upload must outlast the timeout to mean anything";
}

TEST_P(proxy_test, head_passes_the_length_on_without_a_body) {
    GLUON_REQUIRE_PEER(have("curl"), "no curl command");
    start_upstream();
    start_reverse({upstream_addr()});
    for (const char* version : {"--http1.1", "--http2-prior-knowledge"}) {
        auto r = curl({version, "-I", proxy_url("/big")});
        ASSERT_EQ(r.status, 0) << r.err;
        EXPECT_NE(r.out.find("200"), std::string::npos) << r.out;
        std::string lower;
        for (char ch : r.out) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
        EXPECT_NE(lower.find("content-length: " + std::to_string(big_.size())), std::string::npos) << r.out;
    }
}

// A HEAD answered without a Content-Length (the GET's body would be chunked, or end at the
// close) goes on without one, over both versions. The proxy's server added Content-Length: 0,
// telling the client that the GET's body was empty.
TEST_P(proxy_test, head_without_a_length_is_not_given_one) {
    for (const char* reply : {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Up: 1\r\n\r\n",
                              "HTTP/1.1 200 OK\r\nConnection: close\r\nX-Up: 1\r\n\r\n"}) {
        SCOPED_TRACE(reply);
        raw_upstream up;
        up.reply = reply;
        up.start();
        start_reverse({up.addr()});
        auto c = net::stream::connect(proxy_->local_address(), 5s);
        ASSERT_TRUE(c);
        for (int i = 0; i < 2; ++i) {  // the connection stays in step: no body followed
            auto got = roundtrip(*c, "HEAD /x HTTP/1.1\r\nHost: t\r\n\r\n", method::head);
            ASSERT_TRUE(got) << i;
            EXPECT_EQ(got->status, 200);
            EXPECT_EQ(field(got->head, "X-Up"), "1");
            EXPECT_EQ(field(got->head, "Content-Length"), "") << got->head;
        }
        client h2({.http2_prior_knowledge = true});
        client_request q;
        q.method = method::head;
        q.url = proxy_url("/x");
        auto r = h2.send(q);
        ASSERT_TRUE(r) << r.error().message();
        EXPECT_EQ(r->status, 200);
        EXPECT_EQ(r->header("x-up"), "1");
        EXPECT_EQ(r->header("content-length"), "");
        EXPECT_EQ(h2.statistics().http2_requests, 1u);
        proxy_.reset();
    }
}

TEST_P(proxy_test, upstream_down_is_502_and_a_silent_upstream_is_504) {
    GLUON_REQUIRE_PEER(have("curl"), "no curl command");
    test::refusing_port nobody;
    start_reverse({"127.0.0.1:" + std::to_string(nobody.port())});
    auto r = curl({"-w", "%{http_code}", "-o", "/dev/null", proxy_url("/x")});
    EXPECT_EQ(r.out, "502");
    proxy_.reset();

    raw_upstream up;  // reads the request, never answers
    up.start();
    proxy_options o;
    o.read_timeout = 300ms;
    o.retries = 0;
    start_reverse({up.addr()}, o);
    r = curl({"-w", "%{http_code}", "-o", "/dev/null", proxy_url("/slow")});
    EXPECT_EQ(r.out, "504");
}

// A timeout is not retried, even for a request that may be sent again: the upstream may still
// be working on it. The client waited (1 + retries) read timeouts for its 504, while each
// upstream in turn got the request.
TEST_P(proxy_test, a_silent_upstream_is_504_after_one_read_timeout_without_a_retry) {
    raw_upstream a, b;  // both read the request and never answer
    a.start();
    b.start();
    proxy_options o;
    o.read_timeout = 300ms;
    o.retries = 1;
    start_reverse({a.addr(), b.addr()}, o);
    auto c = net::stream::connect(proxy_->local_address(), 5s);
    ASSERT_TRUE(c);
    auto got = roundtrip(*c, "GET /slow HTTP/1.1\r\nHost: t\r\n\r\n");
    ASSERT_TRUE(got);
    EXPECT_EQ(got->status, 504);
    EXPECT_EQ(a.served + b.served, 1);
}

TEST_P(proxy_test, a_malformed_upstream_response_is_502) {
    GLUON_REQUIRE_PEER(have("curl"), "no curl command");
    for (const char* reply : {"not HTTP at all\r\n\r\n", "HTTP/1.1 2x0 OK\r\n\r\n",
                              "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"}) {
        SCOPED_TRACE(reply);
        raw_upstream up;
        up.reply = reply;
        up.start();
        start_reverse({up.addr()});
        auto r = curl({"-w", "%{http_code}", "-o", "/dev/null", proxy_url("/x")});
        EXPECT_EQ(r.out, "502");
        proxy_.reset();
    }
}

TEST_P(proxy_test, a_pooled_connection_the_upstream_closed_is_retried_on_a_new_one) {
    GLUON_REQUIRE_PEER(have("curl"), "no curl command");
    raw_upstream up;  // answers as if it kept the connection, then closes it
    up.reply = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    up.start();
    start_reverse({up.addr()});
    for (int i = 0; i < 3; ++i) {
        auto r = curl({"-w", "|%{http_code}", proxy_url("/again")});
        EXPECT_EQ(r.out, "ok|200") << i << r.err;
    }
    EXPECT_EQ(up.served, 3);
}

// A request that cannot be sent again (a POST with a body) never goes out on a pooled
// connection the upstream has closed, however briefly it idled: it is checked first, and the
// request goes on a new one instead of failing with a 502.
TEST_P(proxy_test, a_request_that_cannot_be_retried_is_not_sent_on_a_pooled_connection_the_upstream_closed) {
    raw_upstream up;  // answers as if it kept the connection, then closes it
    up.reply = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
    up.start();
    start_reverse({up.addr()});
    for (int i = 0; i < 3; ++i) {
        auto c = net::stream::connect(proxy_->local_address(), 5s);
        ASSERT_TRUE(c);
        auto got = roundtrip(*c, "POST /once HTTP/1.1\r\nHost: t\r\nContent-Length: 4\r\n\r\nbody");
        ASSERT_TRUE(got) << i;
        EXPECT_EQ(got->status, 200) << i;
        EXPECT_EQ(got->body, "ok") << i;
        ASSERT_TRUE(test::eventually([&] { return up.closed == i + 1; }));  // gone before the next
    }
    EXPECT_EQ(up.served, 3);
}

TEST_P(proxy_test, clients_over_tls_are_forwarded_as_https) {
    GLUON_REQUIRE_PEER(have("curl"), "no curl command");
    raw_upstream up;
    up.reply = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
    up.start();
    proxy_options po;
    po.upstreams = {up.addr()};
    server_options so;
    so.wrap = net::tls::server_wrap(net::tls_testing::server_ctx({}), 10s);
    auto s = server::start(net::address::ipv4_loopback(0), reverse_proxy(po), so);
    ASSERT_TRUE(s) << s.error().message();
    auto r = curl({"--cacert", certs().dir + "/ca.pem",
                   "https://localhost:" + std::to_string((*s)->local_address().port()) + "/secure"});
    EXPECT_EQ(r.out, "ok") << r.err;
    EXPECT_NE(up.request.find("\r\nX-Forwarded-Proto: https\r\n"), std::string::npos) << up.request;
    EXPECT_NE(up.request.find("\r\nX-Forwarded-Host: localhost:"), std::string::npos) << up.request;
    (*s)->stop(1s);
}

TEST_P(proxy_test, an_upstream_reset_mid_body_fails_the_client_instead_of_a_short_200) {
    GLUON_REQUIRE_PEER(have("curl"), "no curl command");
    for (bool chunked : {false, true}) {
        SCOPED_TRACE(chunked ? "chunked" : "content-length");
        raw_upstream up;
        up.reply = chunked ? "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n400\r\n" + pattern(1024) + "\r\n"
                           : "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + pattern(1024);
        up.reset = true;
        up.start();
        start_reverse({up.addr()});
        for (const char* version : {"--http1.1", "--http2-prior-knowledge"}) {
            auto r = curl({version, "-o", "/dev/null", proxy_url("/cut")});
            EXPECT_NE(r.status, 0) << version << ": the cut body looked complete";
        }
        proxy_.reset();
    }
}

// An upstream that refuses a body before it has taken it (a 413: the body is over its limit)
// answers and closes the connection while the proxy is still sending the body: the proxy's
// write fails (EPIPE or ECONNRESET), but the answer has arrived, and the client gets it. The
// client got a 502.
TEST_P(proxy_test, an_upstream_answer_before_the_whole_body_is_relayed_not_a_502) {
    router small;
    small.put("/upload", [](request& req, response& res) { res.body(req.body() ? "taken" : "refused"); });
    server_options so;
    so.max_body_bytes = 1024;
    auto up = server::start(net::address::ipv4_loopback(0), small.as_handler(), so);
    ASSERT_TRUE(up) << up.error().message();
    upstream_ = std::move(*up);
    start_reverse({upstream_addr()});
    auto c = net::stream::connect(proxy_->local_address(), 5s);
    ASSERT_TRUE(c);
    // The client writes on a fiber of its own and reads the answer meanwhile, as the proxy's
    // own server may answer (and close) before it has read the whole body too.
    const std::string body(32 << 20, 'b');  // far more than the sockets' buffers hold
    const std::string head =
        "PUT /upload HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
    auto writer = spawn([&] {
        if (send_text(*c, head)) (void)c->write_all(body.data(), body.size(), 5s);
    });
    ASSERT_TRUE(writer);
    std::string buf;
    auto got = read_reply(*c, buf);
    (void)c->shutdown(SHUT_RDWR);  // ends the writer if the proxy has not
    ASSERT_TRUE(writer->join());
    ASSERT_TRUE(got);
    EXPECT_EQ(got->status, 413);
}

// A reverse proxy opens no tunnels: CONNECT is answered 501 and never reaches an upstream,
// whose 2xx would have left a pooled connection tunnelled to the client's target.
TEST_P(proxy_test, a_reverse_proxy_answers_connect_501_without_an_upstream) {
    raw_upstream up;
    up.reply = "HTTP/1.1 200 Connection Established\r\n\r\n";
    up.start();
    start_reverse({up.addr()});
    auto c = net::stream::connect(proxy_->local_address(), 5s);
    ASSERT_TRUE(c);
    auto got = roundtrip(*c, "CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n", method::connect);
    ASSERT_TRUE(got);
    EXPECT_EQ(got->status, 501);
    EXPECT_EQ(up.served, 0);
}

// A request whose declared length is over its limit is answered 413 without an upstream
// connection: the limit is checked at the body's first read, once the proxy's handler runs, and
// the proxy took (opened) a connection to the upstream first, only to close it unused. The
// upstream is a plain listening socket: the proxy's connect completes in the kernel before its
// answer can leave, so a connection it opened is still waiting to be accepted.
TEST_P(proxy_test, a_body_over_the_limit_is_refused_without_an_upstream_connection) {
    const int l = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ASSERT_GE(l, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    ASSERT_EQ(::bind(l, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
    ASSERT_EQ(::listen(l, 16), 0);
    ASSERT_EQ(::getsockname(l, reinterpret_cast<sockaddr*>(&sa), &len), 0);
    const std::string up = "127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
    const std::string length = std::to_string((64 << 20) + 1);  // over start_proxy's limit
    for (bool forward : {false, true}) {
        SCOPED_TRACE(forward ? "forward" : "reverse");
        if (forward) start_proxy(forward_proxy({}));
        else start_reverse({up});
        auto c = net::stream::connect(proxy_->local_address(), 5s);
        ASSERT_TRUE(c);
        const std::string target = forward ? "http://" + up + "/upload" : "/upload";
        auto got = roundtrip(*c, "POST " + target + " HTTP/1.1\r\nHost: t\r\nContent-Length: " + length + "\r\n\r\n");
        ASSERT_TRUE(got);
        EXPECT_EQ(got->status, 413);
        const int opened = ::accept4(l, nullptr, nullptr, SOCK_CLOEXEC);
        EXPECT_LT(opened, 0) << "the proxy connected to its upstream";
        if (opened >= 0) ::close(opened);
        proxy_.reset();
    }
    ::close(l);
}

TEST_P(proxy_test, reuses_pooled_upstream_connections) {
    GLUON_REQUIRE_PEER(have("curl"), "no curl command");
    start_upstream();
    start_reverse({upstream_addr()});
    std::vector<std::string> args = {"--http1.1"};
    for (int i = 0; i < 30; ++i) args.push_back(proxy_url("/peer"));
    auto r = curl(args);  // one client connection, 30 requests in turn
    ASSERT_EQ(r.status, 0) << r.err;
    for (int i = 0; i < 10; ++i) {  // and separate client connections
        r = curl({proxy_url("/peer")});
        ASSERT_EQ(r.out, "ok");
    }
    EXPECT_LE(peers_.size(), 2u);
}

TEST_P(proxy_test, fronts_nginx_over_http1_and_http2) {
    GLUON_REQUIRE_PEER(have("curl"), "no curl command");
    std::string why;
    auto ng = test::nginx::start(why, "location /fields { return 200 \"$http_x_forwarded_for|$http_connection\"; }");
    GLUON_REQUIRE_PEER(ng != nullptr, why);
    std::string file = pattern(4096);
    write_file(ng->www() + "/4k.bin", file);
    write_file(ng->www() + "/1m.bin", pattern(1 << 20));
    start_reverse({"127.0.0.1:" + std::to_string(ng->port())});
    for (const char* version : {"--http1.1", "--http2-prior-knowledge"}) {
        SCOPED_TRACE(version);
        // Over HTTP/2 the two requests are multiplexed on one connection (curl 7.88 fails to
        // reuse a prior-knowledge connection for requests in turn).
        auto r = curl({version, "--parallel", "--parallel-immediate", proxy_url("/4k.bin"), proxy_url("/4k.bin")});
        EXPECT_TRUE(r.out == file + file) << r.out.size() << r.err;
        r = curl({version, proxy_url("/1m.bin")});
        EXPECT_TRUE(r.out == pattern(1 << 20)) << r.out.size() << r.err;
        r = curl({version, "-w", "|%{http_code}", proxy_url("/missing")});
        EXPECT_NE(r.out.find("|404"), std::string::npos) << r.out;
        r = curl({version, "-H", "X-Forwarded-For: 198.51.100.1", proxy_url("/fields")});
        EXPECT_EQ(r.out, "198.51.100.1, 127.0.0.1|") << r.err;
    }
}

TEST_P(proxy_test, forward_proxy_relays_absolute_form_and_tunnels_connect) {
    GLUON_REQUIRE_PEER(have("curl"), "no curl command");
    start_upstream();
    forward_proxy_options fo;
    fo.allow = [](std::string_view host, uint16_t, bool) { return host == "127.0.0.1" || host == "localhost"; };
    start_proxy(forward_proxy(fo));
    const std::string proxy = "http://127.0.0.1:" + std::to_string(proxy_->local_address().port());
    auto r = curl({"-x", proxy, "http://127.0.0.1:" + std::to_string(upstream_->local_address().port()) + "/big"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(r.out == big_) << r.out.size();
    r = curl({"-x", proxy, "-w", "%{http_code}", "-o", "/dev/null", "http://gluon.test/"});
    EXPECT_EQ(r.out, "403");
    // curl -p: plain HTTP through a CONNECT tunnel.
    r = curl({"-p", "-x", proxy, "http://127.0.0.1:" + std::to_string(upstream_->local_address().port()) + "/big"});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(r.out == big_) << r.out.size();

    // CONNECT to a gluon HTTPS server: the TLS session runs end to end through the tunnel.
    net::tls::context_options to;
    to.alpn = {"h2", "http/1.1"};
    server_options so;
    so.wrap = net::tls::server_wrap(net::tls_testing::server_ctx(to), 10s);
    auto tls_srv = server::start(net::address::ipv4_loopback(0), r_.as_handler(), so);
    ASSERT_TRUE(tls_srv);
    std::string ca = certs().dir + "/ca.pem";
    const std::string https = "https://localhost:" + std::to_string((*tls_srv)->local_address().port());
    for (const char* version : {"--http1.1", "--http2"}) {
        r = curl({version, "-x", proxy, "--cacert", ca, https + "/big"});
        ASSERT_EQ(r.status, 0) << r.err;
        EXPECT_TRUE(r.out == big_) << r.out.size();
    }
    proxy_.reset();

    // By default CONNECT reaches port 443 only.
    start_proxy(forward_proxy({}));
    r = curl({"-x", "http://127.0.0.1:" + std::to_string(proxy_->local_address().port()), "--cacert", ca,
              "-w", "%{http_connect}", https + "/big"});
    EXPECT_NE(r.status, 0);
    EXPECT_EQ(r.out, "403");
    (*tls_srv)->stop(1s);
}

// A tunnel silent both ways for tunnel_idle_timeout is closed then, however its directions
// took turns before. Here the client sends a byte a while after the tunnel opened, then half
// closes: the direction from the upstream, alone now, had been waiting since the tunnel opened,
// and waited a whole timeout more after its first one ran out, so the tunnel lived on for
// nearly twice the timeout after the last byte.
TEST_P(proxy_test, a_tunnel_silent_for_its_idle_timeout_is_closed_then) {
    constexpr auto k_idle = 1000ms;
    auto target = net::listener::listen(net::address::ipv4_loopback(0));
    ASSERT_TRUE(target);
    forward_proxy_options fo;
    fo.allow = [](std::string_view, uint16_t, bool) { return true; };
    fo.tunnel_idle_timeout = k_idle;
    start_proxy(forward_proxy(fo));
    auto c = net::stream::connect(proxy_->local_address(), 5s);
    ASSERT_TRUE(c);
    const std::string hp = "127.0.0.1:" + std::to_string(target->local_address()->port());
    auto got = roundtrip(*c, "CONNECT " + hp + " HTTP/1.1\r\nHost: " + hp + "\r\n\r\n", method::connect);
    ASSERT_TRUE(got);
    ASSERT_EQ(got->status, 200);
    auto up = target->accept(5s);
    ASSERT_TRUE(up);
    // Not a wait for anything: the tunnel's reads age a fifth of the timeout before the byte.
    ASSERT_TRUE(this_fiber::sleep_for(k_idle / 5));
    ASSERT_TRUE(c->write_all("x", 1, 5s));
    ASSERT_TRUE(c->shutdown(SHUT_WR));
    const int64_t t0 = mono_now_ns();
    char ch[2];
    auto n = up->read_some(ch, sizeof ch, 5s);
    ASSERT_TRUE(n && *n == 1);
    n = up->read_some(ch, sizeof ch, 5s);  // the half close, passed on
    ASSERT_TRUE(n && *n == 0);
    EXPECT_TRUE(closed_by_server(*c));  // the tunnel ends: the proxy closes the connection
    const auto took = std::chrono::nanoseconds(mono_now_ns() - t0);
    EXPECT_GE(took, k_idle * 9 / 10);
    EXPECT_LT(took, k_idle * 3 / 2) << "the tunnel outlived its idle timeout";
}

GLUON_ENGINE_TEST_SUITE(proxy_test);

}  // namespace
}  // namespace gluon::http
