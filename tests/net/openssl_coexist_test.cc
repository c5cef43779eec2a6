// gluon::net::tls and libcurl's HTTPS share OpenSSL in one process: neither one's
// initialisation breaks the other, and both run at the same time from fibers of one vCPU.
#include <curl/curl.h>

#include <string>
#include <vector>

#include "gluon/net/curl.h"
#include "gluon/runtime/fiber.h"
#include "tls_test_support.h"

namespace gluon::net::tls_testing {
namespace {

// A one-shot HTTP/1.1 responder over TLS.
void http_responder(tls::stream& s) {
    std::string req;
    char buf[4096];
    while (req.find("\r\n\r\n") == std::string::npos) {
        auto n = s.read_some(buf, sizeof buf, 5s);
        if (!n || *n == 0) return;
        req.append(buf, *n);
    }
    const std::string body = "hello over tls";
    const std::string resp = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body.size()) +
                             "\r\nConnection: close\r\n\r\n" + body;
    (void)s.write_all(resp.data(), resp.size(), 5s);
    (void)s.shutdown(1s);
}

size_t collect(char* p, size_t size, size_t n, void* out) {
    static_cast<std::string*>(out)->append(p, size * n);
    return size * n;
}

result<long> curl_get(const std::string& url, std::string& body, const std::string* ca_file) {
    CURL* e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, url.c_str());
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &body);
    if (ca_file) curl_easy_setopt(e, CURLOPT_CAINFO, ca_file->c_str());
    auto r = curl::perform(e, 10s);
    curl_easy_cleanup(e);
    return r;
}

class openssl_coexist_test : public test::engine_test {};
GLUON_ENGINE_TEST_SUITE(openssl_coexist_test);

TEST_P(openssl_coexist_test, libcurl_https_and_gluon_tls_in_one_process) {
    tls_server srv(server_ctx(), http_responder);
    const std::string url = "https://localhost:" + std::to_string(srv.addr().port()) + "/";
    const std::string ca_file = certs().dir + "/ca.pem";
    int ok_curl = 0, ok_tls = 0;
    std::vector<gluon::fiber> fibers;
    for (int i = 0; i < 4; ++i) {
        fibers.push_back(*gluon::spawn([&] {
            std::string body;
            auto r = curl_get(url, body, &ca_file);
            EXPECT_TRUE(r) << r.error().message();
            if (r && *r == 200 && body == "hello over tls") ++ok_curl;
        }));
        fibers.push_back(*gluon::spawn([&] {
            auto s = dial(srv.addr(), client_ctx(), "localhost");
            ASSERT_TRUE(s) << tls::last_error_message();
            const std::string req = "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
            ASSERT_TRUE(s->write_all(req.data(), req.size(), 5s));
            std::string resp;
            char buf[1024];
            while (auto n = s->read_some(buf, sizeof buf, 5s)) {
                if (*n == 0) break;
                resp.append(buf, *n);
            }
            if (resp.find("hello over tls") != std::string::npos) ++ok_tls;
        }));
    }
    for (auto& f : fibers) ASSERT_TRUE(f.join());
    EXPECT_EQ(ok_curl, 4);
    EXPECT_EQ(ok_tls, 4);

    // Each side keeps its own verification: libcurl without the test CA refuses the server,
    // and gluon's clients still verify afterwards.
    auto f = gluon::spawn([&] {
        std::string body;
        auto r = curl_get(url, body, nullptr);
        ASSERT_FALSE(r);
        EXPECT_EQ(r.error(), curl::make_error_code(CURLE_PEER_FAILED_VERIFICATION)) << r.error().message();
        auto bad = dial(srv.addr(), client_ctx({.ca_pem = certs().other_ca.cert}), "localhost");
        ASSERT_FALSE(bad);
        EXPECT_EQ(bad.error(), tls::make_error_code(tls::errc::verify_failed));
    });
    ASSERT_TRUE(f->join());
}

}  // namespace
}  // namespace gluon::net::tls_testing
