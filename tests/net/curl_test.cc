#include "gluon/net/curl.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gluon/net/server.h"
#include "gluon/net/socket.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/runtime.h"
#include "support/nginx.h"
#include "test_support.h"

namespace gluon::net::curl {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr int k_small_files = 100;
constexpr size_t k_big_size = 10 * 1024 * 1024;

std::string small_content(int i) {
    std::string s = "file " + std::to_string(i) + "\n";
    while (s.size() < static_cast<size_t>(100 + i * 97))
        s += static_cast<char>('a' + (s.size() * 7 + i) % 26);
    return s;
}

std::string big_content() {
    std::string s(k_big_size, '\0');
    uint32_t x = 12345;
    for (char& c : s)
        c = static_cast<char>((x = x * 1103515245 + 12345) >> 24);
    return s;
}

// nginx serving the test's files.
std::unique_ptr<test::nginx> start_nginx(std::string& why) {
    auto n = test::nginx::start(why);
    if (!n) return n;
    const std::string www = n->www();
    fs::create_directories(www + "/small");
    std::ofstream(www + "/hello.txt") << "hello, gluon\n";
    for (int i = 0; i < k_small_files; ++i) std::ofstream(www + "/small/" + std::to_string(i) + ".txt") << small_content(i);
    std::ofstream(www + "/big.bin", std::ios::binary) << big_content();
    return n;
}

class curl_test : public test::engine_test {
protected:
    static void SetUpTestSuite() { server_ = start_nginx(why_).release(); }
    static void TearDownTestSuite() {
        delete server_;
        server_ = nullptr;
    }
    void SetUp() override {
        GLUON_REQUIRE_PEER(server_, why_);
        test::engine_test::SetUp();
    }
    static std::string url(const std::string& path) { return server_->url(path); }

    static inline test::nginx* server_ = nullptr;
    static inline std::string why_;
};
GLUON_ENGINE_TEST_SUITE(curl_test);

// Tests whose peer is a gluon server in the test itself (no nginx needed).
class curl_local_test : public test::engine_test {};
GLUON_ENGINE_TEST_SUITE(curl_local_test);

TEST(curl, error_categories) {
    std::error_code e = make_error_code(CURLE_COULDNT_CONNECT);
    EXPECT_STREQ(e.category().name(), "curl");
    EXPECT_EQ(e.message(), "Couldn't connect to server");
    EXPECT_TRUE(make_error_code(CURLE_OPERATION_TIMEDOUT) == std::errc::timed_out);
    EXPECT_TRUE(make_error_code(CURLE_ABORTED_BY_CALLBACK) == std::errc::operation_canceled);
    std::error_code m(CURLM_ADDED_ALREADY, multi_category());
    EXPECT_FALSE(m.message().empty());
}

TEST_P(curl_test, get_returns_status_body_and_headers) {
    auto r = get(url("/hello.txt"));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "hello, gluon\n");
    ASSERT_NE(r->header("content-length"), nullptr);
    EXPECT_EQ(*r->header("Content-Length"), "13");
    ASSERT_NE(r->header("content-type"), nullptr);
    EXPECT_EQ(*r->header("content-type"), "text/plain");
}

TEST_P(curl_test, not_found_is_a_status_not_an_error) {
    auto r = get(url("/missing"));
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->status, 404);
}

TEST_P(curl_test, perform_runs_a_user_configured_handle_on_a_10mb_file) {
    struct digest {
        size_t bytes = 0;
        uint64_t hash = 1469598103934665603ull;
    } d, want;
    for (char c : big_content())
        want.hash = (want.hash ^ static_cast<uint8_t>(c)) * 1099511628211ull;
    CURL* e = curl_easy_init();
    ASSERT_NE(e, nullptr);
    curl_easy_setopt(e, CURLOPT_URL, url("/big.bin").c_str());
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &d);
    curl_easy_setopt(
        e, CURLOPT_WRITEFUNCTION, +[](char* p, size_t, size_t n, void* ud) -> size_t {
            auto* d = static_cast<digest*>(ud);
            for (size_t i = 0; i < n; ++i)
                d->hash = (d->hash ^ static_cast<uint8_t>(p[i])) * 1099511628211ull;
            d->bytes += n;
            return n;
        });
    auto st = perform(e, 20s);
    ASSERT_TRUE(st) << st.error().message();
    EXPECT_EQ(*st, 200);
    EXPECT_EQ(d.bytes, k_big_size);
    EXPECT_EQ(d.hash, want.hash);
    // The same handle again: it left the multi handle cleanly.
    d = {};
    ASSERT_TRUE(perform(e, 20s));
    EXPECT_EQ(d.bytes, k_big_size);
    curl_easy_cleanup(e);
}

TEST_P(curl_test, fibers_of_a_vcpu_share_its_connection_cache) {
    auto new_connections = [&] {
        CURL* e = curl_easy_init();
        curl_easy_setopt(e, CURLOPT_URL, url("/hello.txt").c_str());
        curl_easy_setopt(
            e, CURLOPT_WRITEFUNCTION, +[](char*, size_t, size_t n, void*) { return n; });
        EXPECT_TRUE(perform(e, 5s));
        long n = -1;
        curl_easy_getinfo(e, CURLINFO_NUM_CONNECTS, &n);
        curl_easy_cleanup(e);
        return n;
    };
    EXPECT_EQ(new_connections(), 1);  // a fresh vCPU, a fresh multi handle
    long second = -1;
    ASSERT_TRUE(spawn([&] { second = new_connections(); })->join());
    EXPECT_EQ(second, 0);  // another fiber, another easy handle: the kept-alive connection
}

TEST_P(curl_test, hundred_concurrent_gets_from_hundred_fibers) {
    std::atomic<int> ok{0};
    std::vector<fiber> fibers;
    for (int i = 0; i < k_small_files; ++i) {
        fibers.push_back(*spawn([&, i] {
            auto r = get(url("/small/" + std::to_string(i) + ".txt"), {.timeout = 15s});
            if (!r) {
                ADD_FAILURE() << i << ": " << r.error().message();
                return;
            }
            EXPECT_EQ(r->status, 200);
            EXPECT_EQ(r->body, small_content(i)) << i;
            if (r->status == 200 && r->body == small_content(i)) ++ok;
        }));
    }
    for (auto& f : fibers)
        ASSERT_TRUE(f.join());
    EXPECT_EQ(ok.load(), k_small_files);
}

TEST_P(curl_test, connection_refused_is_a_clear_curl_error) {
    auto l = listener::listen(address::ipv4_loopback(0));
    ASSERT_TRUE(l);
    const uint16_t port = l->local_address()->port();
    ASSERT_TRUE(l->close());
    auto r = get("http://127.0.0.1:" + std::to_string(port) + "/", {.timeout = 5s});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), make_error_code(CURLE_COULDNT_CONNECT)) << r.error().message();
    EXPECT_EQ(r.error().message(), "Couldn't connect to server");
}

double thread_cpu_seconds() {
    rusage u{};
    ::getrusage(RUSAGE_THREAD, &u);
    auto sec = [](timeval t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
    return sec(u.ru_utime) + sec(u.ru_stime);
}

TEST_P(curl_test, timeout_is_prompt_and_the_vcpu_keeps_serving) {
    // Accepted by the kernel (backlog), never answered.
    auto silent = listener::listen(address::ipv4_loopback(0));
    ASSERT_TRUE(silent);
    const std::string silent_url =
        "http://127.0.0.1:" + std::to_string(silent->local_address()->port()) + "/";

    std::error_code timed_out;
    auto waiting = spawn([&] {
        const auto t0 = std::chrono::steady_clock::now();
        timed_out = get(silent_url, {.timeout = 300ms}).error();
        const auto took = std::chrono::steady_clock::now() - t0;
        EXPECT_GE(took, 250ms);
        EXPECT_LT(took, 2s);
    });
    // Served while the other transfer waits.
    for (int i = 0; i < 5; ++i) {
        auto r = get(url("/hello.txt"), {.timeout = 5s});
        ASSERT_TRUE(r) << r.error().message();
        EXPECT_EQ(r->status, 200);
    }
    ASSERT_TRUE(waiting->join());
    EXPECT_EQ(timed_out, std::errc::timed_out);
    EXPECT_EQ(get(url("/hello.txt"))->status, 200);

    // libcurl's own timeout on a user handle: a curl error that still compares as timed_out.
    CURL* e = curl_easy_init();
    curl_easy_setopt(e, CURLOPT_URL, silent_url.c_str());
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, 200L);
    auto st = perform(e);
    ASSERT_FALSE(st);
    EXPECT_EQ(st.error(), make_error_code(CURLE_OPERATION_TIMEDOUT));
    EXPECT_TRUE(st.error() == std::errc::timed_out);
    curl_easy_cleanup(e);

    // Waiting costs no CPU: the vCPU sleeps in its engine, nothing polls.
    const double cpu0 = thread_cpu_seconds();
    EXPECT_EQ(get(silent_url, {.timeout = 400ms}).error(), std::errc::timed_out);
    EXPECT_LT(thread_cpu_seconds() - cpu0, 0.1);
}

TEST_P(curl_test, interrupt_mid_transfer_is_ecanceled_and_the_multi_stays_usable) {
    auto silent = listener::listen(address::ipv4_loopback(0));
    ASSERT_TRUE(silent);
    const std::string silent_url =
        "http://127.0.0.1:" + std::to_string(silent->local_address()->port()) + "/x";
    std::error_code got;
    auto f = spawn([&] { got = get(silent_url).error(); });
    // Mid-transfer: connected, and the request has been sent.
    auto conn = silent->accept(5s);
    ASSERT_TRUE(conn) << conn.error().message();
    std::string req;
    char buf[1024];
    while (req.find("\r\n\r\n") == std::string::npos) {
        auto n = conn->read_some(buf, sizeof buf, 5s);
        ASSERT_TRUE(n && *n > 0);
        req.append(buf, *n);
    }
    EXPECT_TRUE(req.starts_with("GET /x HTTP/1.1\r\n")) << req;
    ASSERT_TRUE(f->interrupt());
    ASSERT_TRUE(f->join());
    EXPECT_EQ(got, std::errc::operation_canceled);
    // The handle left the multi and its connection was closed.
    auto n = conn->read_some(buf, sizeof buf, 5s);
    EXPECT_TRUE((n && *n == 0) || n.error() == std::errc::connection_reset);
    auto r = get(url("/hello.txt"), {.timeout = 5s});
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->body, "hello, gluon\n");
}

TEST_P(curl_test, post_sends_body_and_headers) {
    // A minimal HTTP peer on gluon that echoes the request body.
    auto srv = server::start(address::ipv4_loopback(0), [](byte_stream& s) {
        std::string in;
        char buf[4096];
        size_t end;
        while ((end = in.find("\r\n\r\n")) == std::string::npos) {
            auto n = s.read_some(buf, sizeof buf, 5s);
            if (!n || *n == 0) return;
            in.append(buf, *n);
        }
        const size_t cl = in.find("Content-Length: ");
        const size_t len = cl == std::string::npos ? 0 : std::stoul(in.substr(cl + 16));
        const bool typed = in.find("Content-Type: text/x-gluon\r\n") != std::string::npos;
        std::string body = in.substr(end + 4);
        while (body.size() < len) {
            auto n = s.read_some(buf, sizeof buf, 5s);
            if (!n || *n == 0) return;
            body.append(buf, *n);
        }
        std::string out = "HTTP/1.1 201 Created\r\nContent-Length: " + std::to_string(body.size()) +
                          "\r\nX-Typed: " + (typed ? "yes" : "no") +
                          "\r\nConnection: close\r\n\r\n" + body;
        (void)s.write_all(out.data(), out.size(), 5s);
    });
    ASSERT_TRUE(srv);
    const std::string where = "http://" + (*srv)->local_address().to_string() + "/echo";
    auto r =
        post(where, "name=gluon&x=1", {.timeout = 5s, .headers = {"Content-Type: text/x-gluon"}});
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(r->status, 201);
    EXPECT_EQ(r->body, "name=gluon&x=1");
    ASSERT_NE(r->header("x-typed"), nullptr);
    EXPECT_EQ(*r->header("x-typed"), "yes");
    (*srv)->stop(1s);
}

// A server that redirects every request to itself: following stops at max_redirects (30 by
// default), where libcurl before 8.3 followed without end.
TEST_P(curl_local_test, a_redirect_loop_ends_after_max_redirects) {
    int requests = 0;
    auto srv = server::start(address::ipv4_loopback(0), [&](byte_stream& s) {
        std::string in;
        char buf[4096];
        for (;;) {
            size_t end;
            while ((end = in.find("\r\n\r\n")) == std::string::npos) {
                auto n = s.read_some(buf, sizeof buf, 5s);
                if (!n || *n == 0) return;
                in.append(buf, *n);
            }
            in.erase(0, end + 4);
            ++requests;
            const std::string_view again =
                "HTTP/1.1 302 Found\r\nLocation: /again\r\nContent-Length: 0\r\n\r\n";
            if (!s.write_all(again.data(), again.size(), 5s)) return;
        }
    });
    ASSERT_TRUE(srv);
    const std::string where = "http://" + (*srv)->local_address().to_string() + "/";
    auto r = get(where, {.timeout = 10s, .follow_redirects = true});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), make_error_code(CURLE_TOO_MANY_REDIRECTS)) << r.error().message();
    EXPECT_EQ(requests, 31);  // the first, then the 30 redirects followed
    requests = 0;
    r = get(where, {.timeout = 10s, .follow_redirects = true, .max_redirects = 2});
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), make_error_code(CURLE_TOO_MANY_REDIRECTS)) << r.error().message();
    EXPECT_EQ(requests, 3);
    (*srv)->stop(duration::zero());  // its handler waits for the next request on curl's connection
}

TEST_P(curl_test, fini_with_a_transfer_in_flight_cancels_it) {
    auto silent = listener::listen(address::ipv4_loopback(0));
    ASSERT_TRUE(silent);
    const std::string silent_url =
        "http://127.0.0.1:" + std::to_string(silent->local_address()->port()) + "/";
    std::error_code got;
    auto f = spawn([&] { got = get(silent_url).error(); });
    ASSERT_TRUE(silent->accept(5s));
    ASSERT_TRUE(silent->close());
    ASSERT_TRUE(fini());
    EXPECT_EQ(got, std::errc::operation_canceled);
    // A vCPU started again on this thread gets a fresh multi handle.
    init_options o;
    o.engine = GetParam();
    o.log_engine = false;
    ASSERT_TRUE(init(o));
    EXPECT_EQ(get(url("/hello.txt"))->status, 200);
}

TEST_P(curl_test, two_vcpus_transfer_concurrently_and_a_fiber_migrates_between_them) {
    auto rt = runtime::start(test::test_runtime(2, GetParam()));
    ASSERT_TRUE(rt) << rt.error().message();
    std::atomic<int> ok{0};
    int index[2] = {-1, -1};
    auto on_vcpu = [&](unsigned v) {
        index[v] = current_vcpu_index();
        std::vector<fiber> fs;
        for (int i = 0; i < 20; ++i)
            fs.push_back(*spawn([&, v, i] {
                const int k = static_cast<int>(v) * 20 + i;
                auto r = get(url("/small/" + std::to_string(k) + ".txt"), {.timeout = 15s});
                if (r && r->status == 200 && r->body == small_content(k) &&
                    current_vcpu_index() == index[v])
                    ++ok;
            }));
        for (auto& f : fs)
            (void)f.join();
    };
    auto a = spawn([&] { ASSERT_TRUE((*rt)->run(0, [&] { on_vcpu(0); })); });
    auto b = spawn([&] { ASSERT_TRUE((*rt)->run(1, [&] { on_vcpu(1); })); });
    ASSERT_TRUE(a->join());
    ASSERT_TRUE(b->join());
    EXPECT_EQ(ok.load(), 40);
    EXPECT_NE(index[0], index[1]);

    // One fiber, one easy handle, a transfer on each vCPU: each runs on the local multi.
    ASSERT_TRUE((*rt)->run(0, [&] {
        CURL* e = curl_easy_init();
        std::string body;
        curl_easy_setopt(e, CURLOPT_URL, url("/hello.txt").c_str());
        curl_easy_setopt(e, CURLOPT_WRITEDATA, &body);
        curl_easy_setopt(
            e, CURLOPT_WRITEFUNCTION, +[](char* p, size_t, size_t n, void* ud) -> size_t {
                static_cast<std::string*>(ud)->append(p, n);
                return n;
            });
        for (unsigned hop = 0; hop < 4; ++hop) {
            ASSERT_TRUE(this_fiber::migrate_to((*rt)->vcpu(hop % 2)));
            body.clear();
            auto st = perform(e, 5s);
            ASSERT_TRUE(st) << st.error().message();
            EXPECT_EQ(body, "hello, gluon\n");
        }
        curl_easy_cleanup(e);
    }));
    rt->reset();  // each vCPU's fini ends its curl driver on its own thread
}

} // namespace
} // namespace gluon::net::curl
