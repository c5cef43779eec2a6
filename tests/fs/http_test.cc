// The HTTP filesystem against nginx serving a directory (with and without Range support), and
// against gluon servers that misbehave on purpose (5xx, a reset mid-body, a redirect, HTTPS), on
// every engine.
#include "gluon/fs/http.h"

#include <gtest/gtest.h>
#include <sys/time.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <random>
#include <string>

#include "gluon/http/router.h"
#include "gluon/http/server.h"
#include "gluon/http/static_files.h"
#include "gluon/net/server.h"
#include "gluon/runtime/fiber.h"
#include "net/tls_test_support.h"
#include "support/nginx.h"
#include "test_support.h"

namespace gluon::fs {
namespace {

using namespace std::chrono_literals;

std::string random_bytes(size_t n, unsigned seed) {
    std::mt19937 g(seed);
    std::string s(n, '\0');
    for (auto& c : s) c = static_cast<char>(g());
    return s;
}

void write_file(const std::string& p, const std::string& data) { std::ofstream(p, std::ios::binary) << data; }

/// Moves a file's mtime by `seconds`, so its validators change even within one second.
void touch_later(const std::string& p, int seconds) {
    struct stat st{};
    ASSERT_EQ(::stat(p.c_str(), &st), 0);
    timeval tv[2] = {{st.st_mtime + seconds, 0}, {st.st_mtime + seconds, 0}};
    ASSERT_EQ(::utimes(p.c_str(), tv), 0);
}

class http_fs_test : public test::engine_test {
protected:
    static void SetUpTestSuite() {
        nginx_ = test::nginx::start(why_).release();
        // The same directory without Range support: nginx then answers every GET with 200.
        no_ranges_ = test::nginx::start(why_, "  max_ranges 0;").release();
        if (!nginx_ || !no_ranges_) return;
        data_ = random_bytes(3 << 20, 7);
        write_file(nginx_->www() + "/data.bin", data_);
        write_file(no_ranges_->www() + "/data.bin", data_);
        write_file(nginx_->www() + "/a file.txt", "spaces and all\n");
    }
    static void TearDownTestSuite() {
        delete nginx_;
        delete no_ranges_;
        nginx_ = no_ranges_ = nullptr;
    }
    void SetUp() override {
        GLUON_REQUIRE_PEER(nginx_ && no_ranges_, why_);
        test::engine_test::SetUp();
    }
    void TearDown() override {
        servers_.clear();
        raw_.clear();
        test::engine_test::TearDown();
    }
    static std::unique_ptr<filesystem> mount(const std::string& base, http_fs_options o = {}) {
        o.base_url = base;
        o.metadata_ttl = 0s;
        auto fs = make_http_filesystem(std::move(o));
        EXPECT_TRUE(fs) << fs.error().message();
        return fs ? std::move(*fs) : nullptr;
    }
    std::string serve(http::handler h, http::server_options o = {}) {
        auto s = http::server::start(net::address::ipv4_loopback(0), std::move(h), std::move(o));
        EXPECT_TRUE(s);
        std::string origin = "http://127.0.0.1:" + std::to_string((*s)->local_address().port());
        servers_.push_back(std::move(*s));
        return origin;
    }
    uint16_t serve_raw(net::server::handler h) {
        auto s = net::server::start(net::address::ipv4_loopback(0), std::move(h));
        EXPECT_TRUE(s);
        uint16_t port = (*s)->local_address().port();
        raw_.push_back(std::move(*s));
        return port;
    }
    /// What a raw server answers to one request (each read is taken for one request): the
    /// bytes, and whether the connection closes after them.
    struct raw_answer {
        std::string bytes;
        bool close = false;
    };
    uint16_t serve_answers(std::function<raw_answer(std::string_view request)> answer) {
        return serve_raw([answer = std::move(answer)](net::byte_stream& s) {
            char req[4096];
            for (;;) {
                auto n = s.read_some(req, sizeof req, 5s);
                if (!n || *n == 0) return;
                raw_answer a = answer(std::string_view(req, *n));
                if (!s.write_all(a.bytes.data(), a.bytes.size(), 5s) || a.close) return;
            }
        });
    }
    static void expect_window(file& f, size_t n, int64_t off) {
        std::string buf(n, '\0');
        auto r = f.pread(buf.data(), n, off);
        ASSERT_TRUE(r) << r.error().message();
        size_t want = off >= static_cast<int64_t>(data_.size()) ? 0 : std::min(n, data_.size() - off);
        ASSERT_EQ(*r, want);
        EXPECT_EQ(buf.substr(0, want), data_.substr(off, want)) << "at " << off;
    }

    static inline test::nginx* nginx_ = nullptr;
    static inline test::nginx* no_ranges_ = nullptr;
    static inline std::string why_, data_;
    std::vector<std::unique_ptr<http::server>> servers_;
    std::vector<std::unique_ptr<net::server>> raw_;
};

TEST_P(http_fs_test, reads_ranges_of_a_file_served_by_nginx) {
    auto fs = mount(nginx_->url(""));
    auto st = fs->stat("/data.bin");
    ASSERT_TRUE(st) << st.error().message();
    EXPECT_EQ(st->st_size, static_cast<off_t>(data_.size()));
    EXPECT_TRUE(S_ISREG(st->st_mode));
    EXPECT_GT(st->st_mtime, 0);
    auto f = fs->open("/data.bin", O_RDONLY);
    ASSERT_TRUE(f) << f.error().message();
    for (int64_t off : {0L, 1L, 4095L, 1L << 20, static_cast<long>(data_.size()) - 10}) expect_window(**f, 70000, off);
    expect_window(**f, 100, static_cast<int64_t>(data_.size()));  // at the end: 0
    // The position-based calls on top.
    char head[16];
    ASSERT_TRUE((*f)->read(head, sizeof head));
    EXPECT_EQ(std::string(head, 16), data_.substr(0, 16));
    auto st2 = http_fs_statistics(*fs);
    EXPECT_GE(st2.range_reads, 6u);
    EXPECT_EQ(st2.whole_reads, 0u);
    EXPECT_EQ(st2.retries, 0u);
    // Names that need percent-encoding.
    auto g = fs->open("/a file.txt", O_RDONLY);
    ASSERT_TRUE(g) << g.error().message();
    char text[64];
    auto n = (*g)->pread(text, sizeof text, 0);
    ASSERT_TRUE(n);
    EXPECT_EQ(std::string(text, *n), "spaces and all\n");
}

TEST_P(http_fs_test, concurrent_reads_of_one_file_use_separate_connections) {
    http_fs_options o;
    o.client.max_idle_per_origin = 16;
    auto fs = mount(nginx_->url(""), o);
    auto f = fs->open("/data.bin", O_RDONLY);
    ASSERT_TRUE(f);
    std::vector<fiber> readers;
    std::atomic<int> ok{0};
    for (int i = 0; i < 8; ++i) {
        auto r = spawn([&, i] {
            for (int k = 0; k < 4; ++k) {
                int64_t off = (i * 4 + k) * 65536;
                std::string buf(65536, '\0');
                auto n = (*f)->pread(buf.data(), buf.size(), off);
                if (n && *n == buf.size() && buf == data_.substr(off, buf.size())) ++ok;
            }
        });
        ASSERT_TRUE(r);
        readers.push_back(std::move(*r));
    }
    for (auto& r : readers) ASSERT_TRUE(r.join());
    EXPECT_EQ(ok.load(), 32);
    EXPECT_GE(http_fs_statistics(*fs).connections, 2u);  // reads waiting on one another's connection would be 1
}

TEST_P(http_fs_test, refuses_writes_and_maps_missing_files) {
    auto fs = mount(nginx_->url(""));
    EXPECT_EQ(fs->open("/data.bin", O_RDWR).error(), std::errc::read_only_file_system);
    EXPECT_EQ(fs->open("/new", O_CREAT | O_WRONLY).error(), std::errc::read_only_file_system);
    EXPECT_EQ(fs->mkdir("/d").error(), std::errc::read_only_file_system);
    EXPECT_EQ(fs->unlink("/data.bin").error(), std::errc::read_only_file_system);
    EXPECT_EQ(fs->rename("/data.bin", "/x").error(), std::errc::read_only_file_system);
    EXPECT_EQ(fs->access("/data.bin", W_OK).error(), std::errc::read_only_file_system);
    EXPECT_TRUE(fs->access("/data.bin", R_OK));
    EXPECT_EQ(fs->stat("/missing").error(), std::errc::no_such_file_or_directory);
    EXPECT_EQ(fs->open("/missing", O_RDONLY).error(), std::errc::no_such_file_or_directory);
    auto f = fs->open("/data.bin", O_RDONLY);
    ASSERT_TRUE(f);
    char c = 0;
    EXPECT_EQ((*f)->pwrite(&c, 1, 0).error(), std::errc::bad_file_descriptor);
    EXPECT_EQ((*f)->ftruncate(0).error(), std::errc::read_only_file_system);
    EXPECT_TRUE(S_ISDIR(fs->stat("/")->st_mode));
    EXPECT_EQ(fs->open("/", O_RDONLY).error(), std::errc::is_a_directory);
    EXPECT_EQ(fs->open("", O_RDONLY).error(), std::errc::is_a_directory);  // "" is the root, as in stat
    EXPECT_TRUE(S_ISDIR(fs->stat("")->st_mode));
    EXPECT_EQ(fs->opendir("/").error(), std::errc::operation_not_supported);
    EXPECT_EQ(make_http_filesystem({}).error(), std::errc::invalid_argument);
}

TEST_P(http_fs_test, a_file_changed_on_the_server_fails_reads_with_estale) {
    std::string p = nginx_->www() + "/changing.bin";
    write_file(p, std::string(100000, 'a'));
    auto fs = mount(nginx_->url(""));
    auto f = fs->open("/changing.bin", O_RDONLY);
    ASSERT_TRUE(f);
    char buf[10];
    ASSERT_TRUE((*f)->pread(buf, sizeof buf, 0));
    // Same size, other bytes, another mtime: a new ETag.
    write_file(p, std::string(100000, 'b'));
    touch_later(p, 10);
    EXPECT_EQ((*f)->pread(buf, sizeof buf, 50000).error().value(), ESTALE);
    EXPECT_EQ(http_fs_statistics(*fs).stale, 1u);
    // A new open sees the new file.
    auto g = fs->open("/changing.bin", O_RDONLY);
    ASSERT_TRUE(g);
    ASSERT_TRUE((*g)->pread(buf, sizeof buf, 50000));
    EXPECT_EQ(buf[0], 'b');
    // Shorter: the old file's range no longer exists.
    write_file(p, "short");
    touch_later(p, 20);
    EXPECT_EQ((*g)->pread(buf, sizeof buf, 50000).error().value(), ESTALE);
}

TEST_P(http_fs_test, reads_from_a_server_without_range_support) {
    auto fs = mount(no_ranges_->url(""));
    auto f = fs->open("/data.bin", O_RDONLY);
    ASSERT_TRUE(f) << f.error().message();
    for (int64_t off : {0L, 12345L, 2L << 20}) expect_window(**f, 100000, off);
    auto st = http_fs_statistics(*fs);
    EXPECT_GE(st.whole_reads, 3u);
    EXPECT_EQ(st.retries, 0u);
}

TEST_P(http_fs_test, retries_5xx_and_resets_mid_body_with_backoff) {
    // 503 for the first two reads, then the files.
    auto files = http::static_files(nginx_->www());
    ASSERT_TRUE(files);
    std::atomic<int> failures{2};
    std::string origin = serve([&, h = *files](http::request& req, http::response& res) {
        if (req.method() == http::method::get && failures.fetch_sub(1) > 0) return res.status(503);
        h(req, res);
    });
    http_fs_options o;
    o.backoff = 1ms;
    auto fs = mount(origin, o);
    auto f = fs->open("/data.bin", O_RDONLY);
    ASSERT_TRUE(f) << f.error().message();
    expect_window(**f, 5000, 777);
    EXPECT_EQ(http_fs_statistics(*fs).retries, 2u);
    failures = 100;
    std::string buf(10, '\0');
    EXPECT_EQ((*f)->pread(buf.data(), buf.size(), 0).error(), std::errc::io_error);  // retries run out

    // A raw server that cuts the first body in half and closes; later bodies are whole.
    std::atomic<int> cuts{1};
    const std::string body = data_.substr(0, 4096);
    uint16_t port = serve_answers([&](std::string_view r) -> raw_answer {
        std::string head = "HTTP/1.1 " + std::string(r.rfind("HEAD", 0) == 0 ? "200 OK" : "206 Partial Content") +
                           "\r\nContent-Length: 4096\r\nETag: \"v1\"\r\n";
        if (r.rfind("HEAD", 0) == 0) return {head + "Accept-Ranges: bytes\r\n\r\n"};
        head += "Content-Range: bytes 0-4095/4096\r\n\r\n";
        if (cuts.fetch_sub(1) > 0) return {head + body.substr(0, 1000), true};  // closes mid-body
        return {head + body};
    });
    auto raw = mount("http://127.0.0.1:" + std::to_string(port), o);
    auto g = raw->open("/x", O_RDONLY);
    ASSERT_TRUE(g) << g.error().message();
    std::string got(4096, '\0');
    auto n = (*g)->pread(got.data(), got.size(), 0);
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(got, body);
    EXPECT_EQ(http_fs_statistics(*raw).retries, 1u);
    http_fs_options none = o;
    none.retries = 0;
    auto strict = mount("http://127.0.0.1:" + std::to_string(port), none);
    cuts = 1;
    g = strict->open("/x", O_RDONLY);
    ASSERT_TRUE(g);
    EXPECT_FALSE((*g)->pread(got.data(), got.size(), 0));
}

TEST_P(http_fs_test, learns_the_size_from_a_get_where_head_is_refused) {
    auto files = http::static_files(nginx_->www());
    ASSERT_TRUE(files);
    std::string origin = serve([h = *files](http::request& req, http::response& res) {
        if (req.method() == http::method::head) return res.status(405);
        h(req, res);
    });
    auto fs = mount(origin);
    auto st = fs->stat("/data.bin");
    ASSERT_TRUE(st) << st.error().message();
    EXPECT_EQ(st->st_size, static_cast<off_t>(data_.size()));
    auto f = fs->open("/data.bin", O_RDONLY);
    ASSERT_TRUE(f);
    expect_window(**f, 3000, 123456);
    EXPECT_EQ(fs->stat("/missing").error(), std::errc::no_such_file_or_directory);
}

TEST_P(http_fs_test, follows_a_redirect_once_and_reads_from_where_it_led) {
    std::atomic<int> redirects{0};
    std::string origin = serve([&](http::request& req, http::response& res) {
        ++redirects;
        res.status(302);
        res.header("Location", nginx_->url(std::string(req.target())));
    });
    http_fs_options o;
    o.files = {{"moved.bin", origin + "/data.bin"}};
    o.metadata_ttl = 0s;
    auto fs = make_http_filesystem(o);
    ASSERT_TRUE(fs);
    auto f = (*fs)->open("/moved.bin", O_RDONLY);
    ASSERT_TRUE(f) << f.error().message();
    expect_window(**f, 10000, 5000);
    expect_window(**f, 10000, 50000);
    EXPECT_EQ(redirects.load(), 1);  // the HEAD only: reads go to the final URL
    auto d = (*fs)->opendir("/");
    ASSERT_TRUE(d);
    auto e = (*d)->next();
    ASSERT_TRUE(e && *e);
    EXPECT_EQ((*e)->name, "moved.bin");
    EXPECT_FALSE(*(*d)->next());
    EXPECT_EQ((*fs)->stat("/other").error(), std::errc::no_such_file_or_directory);
}

TEST_P(http_fs_test, a_read_of_the_whole_file_skips_the_body_of_a_redirect) {
    // No Range support, and a GET (not the HEAD) that is redirected with a body of its own.
    uint16_t port = serve_answers([](std::string_view r) -> raw_answer {
        if (r.rfind("HEAD ", 0) == 0) return {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nAccept-Ranges: none\r\n\r\n"};
        if (r.rfind("GET /old ", 0) == 0)
            return {"HTTP/1.1 302 Found\r\nLocation: /new\r\nContent-Length: 5\r\n\r\nmoved"};
        return {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789"};
    });
    auto fs = mount("http://127.0.0.1:" + std::to_string(port));
    auto f = fs->open("/old", O_RDONLY);
    ASSERT_TRUE(f) << f.error().message();
    char buf[10];
    auto n = (*f)->pread(buf, sizeof buf, 0);
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(std::string(buf, *n), "0123456789");
    n = (*f)->pread(buf, 4, 3);
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(std::string(buf, *n), "3456");
    EXPECT_EQ(http_fs_statistics(*fs).whole_reads, 2u);
}

TEST_P(http_fs_test, a_range_read_skips_the_body_of_a_redirect_whatever_its_size) {
    // Range reads, redirected with bodies of their own: 8 MiB sent whole, and one that claims
    // 10^17 bytes (the most digits a Content-Length may have) and breaks off after 1 MiB.
    // Redirect bodies were kept in memory with no limit (the filesystem turns the client's
    // off): the claimed length was allocated up front, which no machine has, and the process
    // ended there.
    uint16_t port = serve_answers([](std::string_view r) -> raw_answer {
        if (r.rfind("HEAD ", 0) == 0) return {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\nAccept-Ranges: bytes\r\n\r\n"};
        if (r.rfind("GET /big ", 0) == 0)
            return {"HTTP/1.1 302 Found\r\nLocation: /new\r\nContent-Length: 8388608\r\n\r\n" + std::string(8 << 20, 'r')};
        if (r.rfind("GET /huge ", 0) == 0)  // breaks off
            return {"HTTP/1.1 302 Found\r\nLocation: /new\r\nContent-Length: 100000000000000000\r\n\r\n" +
                        std::string(1 << 20, 'r'),
                    true};
        return {"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-9/10\r\nContent-Length: 10\r\n\r\n0123456789"};
    });
    http_fs_options o;
    o.retries = 0;
    auto fs = mount("http://127.0.0.1:" + std::to_string(port), o);
    for (const char* name : {"/big", "/huge"}) {
        auto f = fs->open(name, O_RDONLY);
        ASSERT_TRUE(f) << name << ": " << f.error().message();
        char buf[10];
        auto n = (*f)->pread(buf, sizeof buf, 0);
        if (std::string_view(name) == "/huge") {
            EXPECT_FALSE(n) << "the body broke off";
            continue;
        }
        ASSERT_TRUE(n) << n.error().message();
        EXPECT_EQ(std::string(buf, *n), "0123456789");
    }
    EXPECT_EQ(http_fs_statistics(*fs).range_reads, 2u);
}

TEST_P(http_fs_test, reads_over_http2_streams_of_one_connection) {
    std::string why;
    auto h2 = test::nginx::start(why, "", " http2");  // h2c by prior knowledge
    GLUON_REQUIRE_PEER(h2, why);
    write_file(h2->www() + "/data.bin", data_);
    http_fs_options o;
    o.client.http2_prior_knowledge = true;
    auto fs = mount(h2->url(""), o);
    auto f = fs->open("/data.bin", O_RDONLY);
    ASSERT_TRUE(f) << f.error().message();
    std::vector<fiber> readers;
    std::atomic<int> ok{0};
    for (int i = 0; i < 8; ++i) {
        auto r = spawn([&, i] {
            int64_t off = i * 300007;
            std::string buf(100000, '\0');
            auto n = (*f)->pread(buf.data(), buf.size(), off);
            if (n && *n == buf.size() && buf == data_.substr(off, buf.size())) ++ok;
        });
        ASSERT_TRUE(r);
        readers.push_back(std::move(*r));
    }
    for (auto& r : readers) ASSERT_TRUE(r.join());
    EXPECT_EQ(ok.load(), 8);
    EXPECT_EQ(http_fs_statistics(*fs).connections, 1u);  // every read a stream of one connection
    // A file changed under an HTTP/2 read is stale there too.
    std::string p = h2->www() + "/data.bin";
    write_file(p, std::string(data_.size(), 'x'));
    touch_later(p, 10);
    char b[10];
    EXPECT_EQ((*f)->pread(b, sizeof b, 0).error().value(), ESTALE);
}

TEST_P(http_fs_test, https_is_verified) {
    using namespace net::tls_testing;
    auto files = http::static_files(nginx_->www());
    ASSERT_TRUE(files);
    http::server_options so;
    so.wrap = net::tls::server_wrap(server_ctx(), 5s);
    auto s = http::server::start(net::address::ipv4_loopback(0), *files, so);
    ASSERT_TRUE(s);
    std::string origin = "https://localhost:" + std::to_string((*s)->local_address().port());
    servers_.push_back(std::move(*s));
    auto trusting = client_ctx();
    http_fs_options o;
    o.client.tls = &trusting;
    auto fs = mount(origin, o);
    auto f = fs->open("/data.bin", O_RDONLY);
    ASSERT_TRUE(f) << f.error().message();
    expect_window(**f, 200000, 99999);
    auto untrusting = mount(origin);  // the system's CAs do not know the test CA
    EXPECT_FALSE(untrusting->open("/data.bin", O_RDONLY));
}

GLUON_ENGINE_TEST_SUITE(http_fs_test);

}  // namespace
}  // namespace gluon::fs
