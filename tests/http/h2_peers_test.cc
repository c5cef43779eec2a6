// The HTTP/2 server against independent peers: curl (prior knowledge, and ALPN over TLS) and
// h2load, on every engine. Each test is skipped when its tool is missing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gluon/http/router.h"
#include "gluon/http/server.h"
#include "gluon/net/tls.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sync/semaphore.h"
#include "net/tls_test_support.h"
#include "support/process.h"
#include "test_support.h"

namespace gluon::http {
namespace {

using namespace std::chrono_literals;
using net::tls_testing::certs;
using net::tls_testing::read_file;
using net::tls_testing::write_file;
using test::child;

bool have(const char* tool) { return !test::find_program(tool).empty(); }

std::string pattern(size_t n) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 131 + i / 7) % 26);
    return s;
}

class h2_peers_test : public test::engine_test {
protected:
    void SetUp() override {
        test::engine_test::SetUp();
        if (IsSkipped()) return;
        dir_ = certs().dir + "/h2-" + std::to_string(::getpid()) + "-" + engine::kind_name(GetParam());
        std::filesystem::create_directories(dir_);
    }
    void TearDown() override {
        srv_.reset();
        std::filesystem::remove_all(dir_);
        test::engine_test::TearDown();
    }
    void start(server_options o = {}) {
        r_.get("/hello", [](request&, response& res) {
            res.content_type("text/plain");
            res.body("hello, h2\n");
        });
        r_.get("/big", [this](request&, response& res) { res.body(big_); });
        r_.get("/stream", [](request&, response& res) {
            for (int i = 0; i < 100; ++i)
                if (!res.write("piece " + std::to_string(i) + "\n")) return;
        });
        r_.get("/trailers", [](request&, response& res) {
            res.trailer("grpc-status", "0");
            res.trailer("x-checksum", "abc123");
            (void)res.write("body before trailers\n");
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
            res.body(std::to_string(n) + " " + std::to_string(sum));
        });
        // /slow answers only once /fast has run: with streams served one at a time it would
        // time out.
        r_.get("/slow", [this](request&, response& res) {
            res.body(fast_done_.wait(10s) ? "slow after fast\n" : "timed out\n");
        });
        r_.get("/fast", [this](request&, response& res) {
            fast_done_.set();
            res.body("fast\n");
        });
        auto s = server::start(net::address::ipv4_loopback(0), r_.as_handler(), std::move(o));
        ASSERT_TRUE(s) << s.error().message();
        srv_ = std::move(*s);
    }
    std::string url(const std::string& path, bool tls = false) const {
        return std::string(tls ? "https" : "http") + "://localhost:" + std::to_string(srv_->local_address().port()) + path;
    }
    /// Runs a peer to its end and returns its standard output.
    std::string run(std::vector<std::string> args, int* status = nullptr) {
        child c(std::move(args), "/dev/null", dir_ + "/out");
        EXPECT_TRUE(c.started());
        int st = c.wait(60s);
        if (status) *status = st;
        else EXPECT_EQ(st, 0) << read_file(dir_ + "/out.err");
        return read_file(dir_ + "/out");
    }
    std::vector<std::string> curl(std::vector<std::string> more) {
        std::vector<std::string> a = {"curl", "-sS", "--max-time", "20", "--noproxy", "*", "--resolve",
                                      "localhost:" + std::to_string(srv_->local_address().port()) + ":127.0.0.1"};
        a.insert(a.end(), more.begin(), more.end());
        return a;
    }

    std::string dir_;
    std::string big_ = pattern(300 * 1000);
    event fast_done_;
    router r_;
    std::unique_ptr<server> srv_;
};

TEST_P(h2_peers_test, curl_with_prior_knowledge_gets_small_large_streamed_and_head) {
    GLUON_REQUIRE_PEER(have("curl"), "no curl command");
    start();
    EXPECT_EQ(run(curl({"--http2-prior-knowledge", "-w", "|%{http_version}|%{http_code}", url("/hello")})),
              "hello, h2\n|2|200");
    EXPECT_EQ(run(curl({"--http2-prior-knowledge", url("/big")})), big_);
    std::string streamed;
    for (int i = 0; i < 100; ++i) streamed += "piece " + std::to_string(i) + "\n";
    EXPECT_EQ(run(curl({"--http2-prior-knowledge", url("/stream")})), streamed);
    std::string head = run(curl({"--http2-prior-knowledge", "-I", url("/big")}));
    EXPECT_EQ(head.rfind("HTTP/2 200", 0), 0u) << head;
    EXPECT_NE(head.find("content-length: 300000"), std::string::npos) << head;
    EXPECT_EQ(run(curl({"--http2-prior-knowledge", "-w", "%{http_code}", "-o", "/dev/null", url("/nothing")})), "404");
    // The same port still speaks HTTP/1.1.
    EXPECT_EQ(run(curl({"--http1.1", "-w", "|%{http_version}", url("/hello")})), "hello, h2\n|1.1");
}

TEST_P(h2_peers_test, curl_over_tls_negotiates_h2_by_alpn_and_http1_without_it) {
    GLUON_REQUIRE_PEER(have("curl"), "no curl command");
    net::tls::context_options to;
    to.alpn = {"h2", "http/1.1"};
    server_options o;
    o.wrap = net::tls::server_wrap(net::tls_testing::server_ctx(to), 10s);
    start(std::move(o));
    std::string ca = certs().dir + "/ca.pem";
    EXPECT_EQ(run(curl({"--http2", "--cacert", ca, "-w", "|%{http_version}", url("/hello", true)})), "hello, h2\n|2");
    EXPECT_EQ(run(curl({"--http2", "--cacert", ca, url("/big", true)})), big_);
    EXPECT_EQ(run(curl({"--http1.1", "--cacert", ca, "-w", "|%{http_version}", url("/hello", true)})),
              "hello, h2\n|1.1");
}

TEST_P(h2_peers_test, request_bodies_larger_than_the_flow_control_windows_arrive_whole) {
    GLUON_REQUIRE_PEER(have("curl"), "no curl command");
    server_options o;
    o.max_body_bytes = 4 << 20;
    o.h2_stream_window = 64 * 1024;
    o.h2_connection_window = 128 * 1024;
    start(std::move(o));
    std::string body = pattern(1 << 20);
    write_file(dir_ + "/body", body);
    uint64_t sum = 0;
    for (unsigned char c : body) sum = sum * 31 + c;
    EXPECT_EQ(run(curl({"--http2-prior-knowledge", "--data-binary", "@" + dir_ + "/body", url("/sum")})),
              std::to_string(body.size()) + " " + std::to_string(sum));
}

TEST_P(h2_peers_test, a_body_over_the_limit_is_refused_with_413) {
    GLUON_REQUIRE_PEER(have("curl"), "no curl command");
    server_options o;
    o.max_body_bytes = 100 * 1000;
    start(std::move(o));
    write_file(dir_ + "/body", pattern(300 * 1000));
    EXPECT_EQ(run(curl({"--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code}", "--data-binary",
                        "@" + dir_ + "/body", url("/sum")})),
              "413");
}

TEST_P(h2_peers_test, a_waiting_stream_does_not_hold_up_the_others_on_its_connection) {
    GLUON_REQUIRE_PEER(have("curl"), "no curl command");
    start();
    // Both on one connection (curl multiplexes parallel transfers over HTTP/2).
    std::string out = run(curl({"--http2-prior-knowledge", "--parallel", "--parallel-immediate", "--parallel-max",
                                "2", url("/slow"), url("/fast")}));
    EXPECT_NE(out.find("slow after fast\n"), std::string::npos) << out;
    EXPECT_NE(out.find("fast\n"), std::string::npos) << out;
}

TEST_P(h2_peers_test, h2load_many_concurrent_streams_all_succeed) {
    GLUON_REQUIRE_PEER(have("h2load"), "no h2load command (Debian nghttp2-client)");
    start();
    std::string out = run({"h2load", "-n", "2000", "-c", "4", "-m", "20", url("/hello")});
    EXPECT_NE(out.find("2000 succeeded, 0 failed, 0 errored"), std::string::npos) << out;
    EXPECT_NE(out.find("status codes: 2000 2xx"), std::string::npos) << out;
    out = run({"h2load", "-n", "200", "-c", "2", "-m", "10", url("/big")});
    EXPECT_NE(out.find("200 succeeded, 0 failed, 0 errored"), std::string::npos) << out;
}

TEST_P(h2_peers_test, trailers_follow_a_streamed_body_over_http2_and_http1) {
    GLUON_REQUIRE_PEER(have("nghttp"), "no nghttp command (Debian nghttp2-client)");
    start();
    std::string out = run({"nghttp", "-v", url("/trailers")});
    size_t body = out.find("body before trailers");
    size_t status = out.find("grpc-status: 0");
    ASSERT_NE(body, std::string::npos) << out;
    ASSERT_NE(status, std::string::npos) << out;
    EXPECT_LT(body, status) << out;
    EXPECT_NE(out.find("x-checksum: abc123"), std::string::npos) << out;
    // Over HTTP/1.1 the same trailers follow the last chunk.
    if (have("curl")) {
        std::string raw = run(curl({"--http1.1", "--raw", url("/trailers")}));
        EXPECT_NE(raw.find("\r\n0\r\ngrpc-status: 0\r\nx-checksum: abc123\r\n\r\n"), std::string::npos) << raw;
    }
}

GLUON_ENGINE_TEST_SUITE(h2_peers_test);

}  // namespace
}  // namespace gluon::http
