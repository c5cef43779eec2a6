// TLS interoperability with command-line peers: a gluon client against openssl s_server, and
// openssl s_client and curl against a gluon server. Each test is skipped when its tool is missing.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "gluon/net/tls.h"
#include "gluon/runtime/fd.h"
#include "gluon/runtime/fiber.h"
#include "support/process.h"
#include "tls_test_support.h"

namespace gluon::net {
namespace {

using namespace tls_testing;

// The tls_test fixture is instantiated for every engine in tls_test.cc.

bool have_tool(const char* name) { return !test::find_program(name).empty(); }
using test::child;
using test::free_port;

// Reads until `end` appears (or EOF/error); returns what came.
std::string recv_until(tls::stream& s, std::string_view end) {
    std::string got;
    char buf[4096];
    while (got.find(end) == std::string::npos) {
        auto n = s.read_some(buf, sizeof buf, 5s);
        if (!n || *n == 0) break;
        got.append(buf, *n);
    }
    return got;
}

TEST_P(tls_test, gluon_client_against_openssl_s_server) {
    GLUON_REQUIRE_PEER(have_tool("openssl"), "no openssl command");
    const std::string& dir = certs().dir;
    uint16_t port = free_port();
    child srv({"openssl", "s_server", "-accept", "127.0.0.1:" + std::to_string(port), "-cert",
               dir + "/server.pem", "-key", dir + "/server.key", "-www", "-naccept", "1", "-alpn",
               "http/1.1"},
              "/dev/null", dir + "/s_server.out");
    ASSERT_TRUE(srv.started());
    // It is ready when a connect succeeds; the pause only spaces the attempts out.
    result<stream> sock = errno_error(ECONNREFUSED);
    for (int i = 0; i < 2000 && !sock && sock.error() == std::errc::connection_refused; ++i) {
        sock = stream::connect(address::ipv4_loopback(port), 2s);
        if (!sock) (void)this_fiber::sleep_for(5ms);
    }
    ASSERT_TRUE(sock) << sock.error().message() << " " << read_file(dir + "/s_server.out.err");
    tls::context_options o;
    o.alpn = {"http/1.1"};
    auto c = tls::stream::connect(std::move(*sock), client_ctx(o), "localhost", 5s);
    ASSERT_TRUE(c) << tls::last_error_message();
    EXPECT_EQ(c->version(), "TLSv1.3");
    EXPECT_EQ(c->alpn_selected(), "http/1.1");
    std::string req = "GET / HTTP/1.0\r\n\r\n";
    ASSERT_TRUE(c->write_all(req.data(), req.size(), 5s));
    std::string resp = recv_until(*c, "</HTML>");
    EXPECT_EQ(resp.rfind("HTTP/1.0 200 ok", 0), 0u) << resp.substr(0, 200);
}

TEST_P(tls_test, openssl_s_client_against_gluon_server) {
    GLUON_REQUIRE_PEER(have_tool("openssl"), "no openssl command");
    const std::string& dir = certs().dir;
    std::string got;
    tls_server srv(server_ctx(), [&](tls::stream& s) {
        got = recv_until(s, "\n");
        (void)s.write_all("hello from gluon\n", 17, 5s);
        (void)s.shutdown(1s);
    });
    write_file(dir + "/s_client.in", "hello from s_client\n");
    child cl({"openssl", "s_client", "-connect", srv.addr().to_string(), "-servername", "localhost",
              "-CAfile", dir + "/ca.pem", "-verify_return_error", "-verify_hostname", "localhost",
              "-quiet"},
             dir + "/s_client.in", dir + "/s_client.out");
    ASSERT_TRUE(cl.started());
    EXPECT_EQ(cl.wait(10s), 0) << read_file(dir + "/s_client.out.err");
    outcome o = srv.next();
    EXPECT_FALSE(o.error) << o.message;
    EXPECT_EQ(o.sni, "localhost");
    EXPECT_EQ(got, "hello from s_client\n");
    EXPECT_EQ(read_file(dir + "/s_client.out"), "hello from gluon\n");
}

TEST_P(tls_test, curl_against_gluon_https_server) {
    GLUON_REQUIRE_PEER(have_tool("curl"), "no curl command");
    const std::string& dir = certs().dir;
    tls::context_options so;
    so.alpn = {"http/1.1"};
    tls_server srv(server_ctx(so), [](tls::stream& s) {
        if (recv_until(s, "\r\n\r\n").rfind("GET /hello HTTP/1.1\r\n", 0) != 0) return;
        std::string resp = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n"
                           "Connection: close\r\n\r\nhello, curl\n";
        (void)s.write_all(resp.data(), resp.size(), 5s);
        (void)s.shutdown(1s);
    });
    std::string port = std::to_string(srv.addr().port());
    child cl({"curl", "-sS", "--max-time", "10", "--noproxy", "*", "--cacert", dir + "/ca.pem",
              "--resolve", "localhost:" + port + ":127.0.0.1",
              "https://localhost:" + port + "/hello"},
             "/dev/null", dir + "/curl.out");
    ASSERT_TRUE(cl.started());
    EXPECT_EQ(cl.wait(15s), 0) << read_file(dir + "/curl.out.err");
    EXPECT_EQ(read_file(dir + "/curl.out"), "hello, curl\n");
    outcome o = srv.next();
    EXPECT_FALSE(o.error) << o.message;
    EXPECT_EQ(o.sni, "localhost");
    EXPECT_EQ(o.alpn, "http/1.1");
}

}  // namespace
}  // namespace gluon::net
