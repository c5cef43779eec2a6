// Static files: cache and sendfile paths, conditionals, ranges, and every way out of the root.
#include "gluon/http/static_files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "gluon/http/router.h"
#include "http/client_support.h"
#include "test_support.h"

namespace gluon::http {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

void write_file(const fs::path& p, const std::string& s) {
    std::ofstream f(p, std::ios::binary | std::ios::trunc);
    f << s;
}

// Sun, 06 Nov 1994 08:49:37 GMT: a modification time whose HTTP-date forms the tests write by hand.
constexpr time_t k_nov_6_1994 = 784111777;

void set_mtime(const fs::path& p, timespec t) {
    const timespec times[2] = {t, t};
    ASSERT_EQ(utimensat(AT_FDCWD, p.c_str(), times, 0), 0) << p;
}
void set_mtime(const fs::path& p, time_t t) { set_mtime(p, timespec{t, 0}); }

class static_files_test : public test::engine_test {
protected:
    void SetUp() override {
        test::engine_test::SetUp();
        if (IsSkipped()) return;
        std::string tmpl = testing::TempDir() + "gluon-static-XXXXXX";
        ASSERT_TRUE(mkdtemp(tmpl.data()));
        dir_ = tmpl;
        root_ = dir_ / "root";
        fs::create_directories(root_ / "sub");
        fs::create_directories(root_ / "noindex");
        write_file(root_ / "small.txt", "hello, static world\n");
        big_.resize(200 * 1000);
        for (size_t i = 0; i < big_.size(); ++i) big_[i] = static_cast<char>('a' + (i * 7) % 26);
        write_file(root_ / "big.bin", big_);
        write_file(root_ / "sub" / "index.html", "<p>index</p>");
        write_file(dir_ / "secret.txt", "outside the root");
        fs::create_symlink(dir_ / "secret.txt", root_ / "escape.txt");
        fs::create_symlink("small.txt", root_ / "inside.txt");
        // Written an hour ago: a file modified less than 2 s before it is read is not cached.
        for (const fs::path& p : {root_ / "small.txt", root_ / "big.bin", root_ / "sub/index.html"})
            set_mtime(p, time(nullptr) - 3600);
    }
    void TearDown() override {
        srv_.reset();
        if (!dir_.empty()) fs::remove_all(dir_);
        test::engine_test::TearDown();
    }
    void start(static_options o = {}) {
        o.cache_file_max = 64 * 1024;
        auto h = static_files(root_.string(), o);
        ASSERT_TRUE(h) << h.error().message();
        router r;
        r.get("/static/*", *h);
        auto s = server::start(net::address::ipv4_loopback(0), r.as_handler());
        ASSERT_TRUE(s);
        srv_ = std::move(*s);
    }
    std::optional<test_reply> get(const std::string& target, const std::string& extra = {},
                                  method verb = method::get) {
        auto c = net::stream::connect(srv_->local_address(), 5s);
        if (!c) return std::nullopt;
        std::string req = std::string(verb == method::head ? "HEAD " : "GET ") + target +
                          " HTTP/1.1\r\nHost: t\r\n" + extra + "\r\n";
        return roundtrip(*c, req, verb);
    }
    fs::path dir_, root_;
    std::string big_;
    std::unique_ptr<server> srv_;
};

TEST_P(static_files_test, serves_small_and_large_files_with_type_and_validators) {
    start();
    for (int round = 0; round < 2; ++round) {  // a miss, then a cache hit
        auto r = get("/static/small.txt");
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 200);
        EXPECT_EQ(r->body, "hello, static world\n");
        EXPECT_NE(r->head.find("Content-Type: text/plain; charset=utf-8\r\n"), std::string::npos);
        EXPECT_NE(r->head.find("\r\nETag: \""), std::string::npos);
        EXPECT_NE(r->head.find("\r\nLast-Modified: "), std::string::npos);
    }
    auto big = get("/static/big.bin");
    ASSERT_TRUE(big);
    EXPECT_EQ(big->body, big_);
    EXPECT_NE(big->head.find("application/octet-stream"), std::string::npos);
    auto head = get("/static/big.bin", {}, method::head);
    ASSERT_TRUE(head);
    EXPECT_EQ(head->body, "");
    EXPECT_NE(head->head.find("Content-Length: 200000\r\n"), std::string::npos);
}

TEST_P(static_files_test, conditionals_give_304) {
    start();
    auto r = get("/static/small.txt");
    ASSERT_TRUE(r);
    std::string etag = field(r->head, "ETag");
    std::string lm = field(r->head, "Last-Modified");
    ASSERT_FALSE(etag.empty());
    EXPECT_EQ(get("/static/small.txt", "If-None-Match: " + etag + "\r\n")->status, 304);
    EXPECT_EQ(get("/static/small.txt", "If-None-Match: \"other\", W/" + etag + "\r\n")->status, 304);
    EXPECT_EQ(get("/static/small.txt", "If-None-Match: \"other\"\r\n")->status, 200);
    // A list split over several field lines is one list (RFC 9110 5.3).
    EXPECT_EQ(get("/static/small.txt", "If-None-Match: \"other\"\r\nIf-None-Match: " + etag + "\r\n")->status, 304);
    EXPECT_EQ(get("/static/big.bin", "If-None-Match: \"a\"\r\nIf-None-Match: \"b\"\r\n")->status, 200);
    EXPECT_EQ(get("/static/small.txt", "If-Modified-Since: " + lm + "\r\n")->status, 304);
    EXPECT_EQ(get("/static/big.bin", "If-Modified-Since: Thu, 01 Jan 1970 00:00:00 GMT\r\n")->status, 200);
}

// A recipient must accept all three forms of HTTP-date (RFC 9110 5.6.7).
TEST_P(static_files_test, dates_are_understood_in_all_three_forms) {
    set_mtime(root_ / "small.txt", k_nov_6_1994);
    start();
    auto r = get("/static/small.txt");
    ASSERT_TRUE(r);
    EXPECT_EQ(field(r->head, "Last-Modified"), "Sun, 06 Nov 1994 08:49:37 GMT");
    for (std::string date : {"Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"}) {
        EXPECT_EQ(get("/static/small.txt", "If-Modified-Since: " + date + "\r\n")->status, 304) << date;
        EXPECT_EQ(get("/static/small.txt", "If-Unmodified-Since: " + date + "\r\n")->status, 200) << date;
    }
    for (std::string earlier : {"Sun, 06 Nov 1994 08:49:36 GMT", "Saturday, 05-Nov-94 08:49:37 GMT", "Sun Nov  6 08:48:37 1994"}) {
        EXPECT_EQ(get("/static/small.txt", "If-Modified-Since: " + earlier + "\r\n")->status, 200) << earlier;
        EXPECT_EQ(get("/static/small.txt", "If-Unmodified-Since: " + earlier + "\r\n")->status, 412) << earlier;
    }
    // Not dates (ignored): an hour past 23, a month that is none, a two-digit year in the IMF form.
    for (std::string bad : {"Sun, 06 Nov 1994 24:49:37 GMT", "Sunday, 06-Nob-94 08:49:37 GMT", "Sun, 06 Nov 94 08:49:37 GMT"})
        EXPECT_EQ(get("/static/small.txt", "If-Unmodified-Since: " + bad + "\r\n")->status, 200) << bad;
}

TEST_P(static_files_test, if_match_and_if_unmodified_since_give_412_in_rfc_9110_order) {
    start();
    auto r = get("/static/small.txt");
    ASSERT_TRUE(r);
    std::string etag = field(r->head, "ETag");
    std::string lm = field(r->head, "Last-Modified");
    ASSERT_FALSE(etag.empty());
    const std::string past = "Thu, 01 Jan 1970 00:00:00 GMT";
    for (const char* file : {"/static/small.txt", "/static/big.bin"}) {  // cached and not
        auto b = get(file);
        ASSERT_TRUE(b);
        std::string tag = field(b->head, "ETag");
        auto failed = get(file, "If-Match: \"other\"\r\n");
        ASSERT_TRUE(failed) << file;
        EXPECT_EQ(failed->status, 412) << file;
        EXPECT_EQ(failed->body, "") << file;
        EXPECT_EQ(get(file, "If-Match: " + tag + "\r\n")->status, 200) << file;
        EXPECT_EQ(get(file, "If-Match: \"other\", " + tag + "\r\n")->status, 200) << file;
        EXPECT_EQ(get(file, "If-Match: *\r\n")->status, 200) << file;
        EXPECT_EQ(get(file, "If-Match: \"other\"\r\nIf-Match: " + tag + "\r\n")->status, 200) << file;  // one list
        EXPECT_EQ(get(file, "If-Match: W/" + tag + "\r\n")->status, 412) << file;  // strong comparison
        EXPECT_EQ(get(file, "If-Unmodified-Since: " + past + "\r\n")->status, 412) << file;
        EXPECT_EQ(get(file, "If-Match: \"other\"\r\nRange: bytes=0-1\r\n")->status, 412) << file;
    }
    EXPECT_EQ(get("/static/small.txt", "If-Unmodified-Since: " + lm + "\r\n")->status, 200);
    EXPECT_EQ(get("/static/small.txt", "If-Unmodified-Since: yesterday\r\n")->status, 200);  // not a date
    // If-Match decides and If-Unmodified-Since is then ignored; both come before If-None-Match.
    EXPECT_EQ(get("/static/small.txt", "If-Match: " + etag + "\r\nIf-Unmodified-Since: " + past + "\r\n")->status, 200);
    EXPECT_EQ(get("/static/small.txt", "If-Match: \"other\"\r\nIf-None-Match: " + etag + "\r\n")->status, 412);
    EXPECT_EQ(get("/static/small.txt", "If-Unmodified-Since: " + past + "\r\nIf-None-Match: " + etag + "\r\n")->status, 412);
    EXPECT_EQ(get("/static/small.txt", "If-Match: " + etag + "\r\nIf-None-Match: " + etag + "\r\n")->status, 304);
    // Preconditions are ignored where the answer would not be 2xx (RFC 9110 13.2.1).
    auto missing = get("/static/none.txt", "If-Match: *\r\n");
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->status, 404);
}

TEST_P(static_files_test, ranges_give_206_and_416) {
    start();
    auto r = get("/static/small.txt", "Range: bytes=7-12\r\n");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 206);
    EXPECT_EQ(r->body, "static");
    EXPECT_EQ(field(r->head, "Content-Range"), "bytes 7-12/20");
    r = get("/static/small.txt", "Range: bytes=-6\r\n");
    EXPECT_EQ(r->body, "world\n");
    r = get("/static/big.bin", "Range: bytes=100000-\r\n");
    EXPECT_EQ(r->status, 206);
    EXPECT_EQ(r->body, big_.substr(100000));
    // A 416 gives the file's length, and its empty body is not described as the file's type
    // (from the cache and from the file).
    for (auto [file, len] : {std::pair{"/static/small.txt", "20"}, std::pair{"/static/big.bin", "200000"}}) {
        r = get(file, "Range: bytes=300000-300010\r\n");
        ASSERT_TRUE(r) << file;
        EXPECT_EQ(r->status, 416) << file;
        EXPECT_EQ(field(r->head, "Content-Range"), std::string("bytes */") + len) << r->head;
        EXPECT_EQ(field(r->head, "Content-Type"), "") << r->head;
        EXPECT_EQ(field(r->head, "Content-Length"), "0") << r->head;
        EXPECT_EQ(r->body, "");
        EXPECT_NE(field(r->head, "ETag"), "") << r->head;
    }
    // Overlapping and adjacent ranges merge into one; ranges past the end are dropped.
    r = get("/static/small.txt", "Range: bytes=2-5, 0-3\r\n");
    EXPECT_EQ(r->status, 206);
    EXPECT_EQ(r->body, "hello,");
    EXPECT_EQ(get("/static/small.txt", "Range: bytes=0-1,2-3\r\n")->body, "hell");
    r = get("/static/small.txt", "Range: bytes=0-1, 50-60\r\n");
    EXPECT_EQ(r->body, "he");
    EXPECT_EQ(field(r->head, "Content-Range"), "bytes 0-1/20");
    EXPECT_EQ(get("/static/small.txt", "Range: bytes=50-60, 70-\r\n")->status, 416);
    EXPECT_EQ(get("/static/small.txt", "Range: bytes=-0\r\n")->status, 416);
    // What is ignored (the file sent whole): another unit, a malformed range, too many ranges,
    // an If-Range that no longer matches.
    for (std::string bad : {"items=0-1", "bytes=1-x", "bytes=5-2", "bytes=", "bytes=0-0,2-2,4-4,6-6,8-8,10-10,12-12,"
                            "14-14,16-16,18-18,0-0,2-2,4-4,6-6,8-8,10-10,12-12,14-14,16-16,18-18,0-0,2-2,4-4,6-6,"
                            "8-8,10-10,12-12,14-14,16-16,18-18,0-0,2-2,4-4"}) {
        r = get("/static/small.txt", "Range: " + bad + "\r\n");
        EXPECT_EQ(r->status, 200) << bad;
        EXPECT_EQ(r->body, "hello, static world\n") << bad;
    }
    EXPECT_EQ(get("/static/small.txt", "Range: bytes=0-1, 4-5\r\nIf-Range: \"old\"\r\n")->status, 200);
}

// If-Range (RFC 9110 13.1.5): Range applies when the validator is the file's current one, an
// ETag compared strongly or a date compared as a date (in any of its forms); otherwise the
// whole file is sent.
TEST_P(static_files_test, if_range_applies_range_only_for_the_current_validator) {
    set_mtime(root_ / "small.txt", k_nov_6_1994);
    set_mtime(root_ / "big.bin", k_nov_6_1994);
    start();
    for (auto [file, whole] : {std::pair{"/static/small.txt", std::string("hello, static world\n")},
                               std::pair{"/static/big.bin", big_}}) {  // cached and not
        auto b = get(file);
        ASSERT_TRUE(b) << file;
        const std::string etag = field(b->head, "ETag");
        ASSERT_EQ(field(b->head, "Last-Modified"), "Sun, 06 Nov 1994 08:49:37 GMT");
        for (std::string match : {etag, std::string("Sun, 06 Nov 1994 08:49:37 GMT"),
                                  std::string("Sunday, 06-Nov-94 08:49:37 GMT"), std::string("Sun Nov  6 08:49:37 1994")}) {
            auto r = get(file, "Range: bytes=2-5\r\nIf-Range: " + match + "\r\n");
            ASSERT_TRUE(r) << match;
            EXPECT_EQ(r->status, 206) << file << " " << match;
            EXPECT_EQ(r->body, whole.substr(2, 4)) << match;
        }
        // A weak or another tag, a date earlier or later than Last-Modified, or no validator at all.
        for (std::string miss : {"W/" + etag, std::string("\"other\""), std::string("Sun, 06 Nov 1994 08:49:36 GMT"),
                                 std::string("Sun Nov  6 08:49:38 1994"), std::string("yesterday")}) {
            auto r = get(file, "Range: bytes=2-5\r\nIf-Range: " + miss + "\r\n");
            ASSERT_TRUE(r) << miss;
            EXPECT_EQ(r->status, 200) << file << " " << miss;
            EXPECT_EQ(r->body.size(), whole.size()) << miss;
            EXPECT_TRUE(r->body == whole) << miss;
        }
    }
}

// The parts of a multipart/byteranges body: {Content-Range, Content-Type, bytes} each.
struct byte_part {
    std::string range, type, bytes;
};
std::vector<byte_part> byteranges(const test_reply& r) {
    std::vector<byte_part> parts;
    const std::string ct = field(r.head, "Content-Type");
    const std::string prefix = "multipart/byteranges; boundary=";
    EXPECT_EQ(ct.rfind(prefix, 0), 0u) << ct;
    const std::string delim = "\r\n--" + ct.substr(prefix.size());
    size_t at = 0;
    while (true) {
        EXPECT_EQ(r.body.compare(at, delim.size(), delim), 0) << r.body;
        at += delim.size();
        if (r.body.compare(at, 4, "--\r\n") == 0) {
            EXPECT_EQ(at + 4, r.body.size()) << "nothing after the closing boundary";
            return parts;
        }
        const size_t head_end = r.body.find("\r\n\r\n", at);
        if (head_end == std::string::npos) return parts;
        std::string head = r.body.substr(at, head_end + 2 - at);
        const size_t end = r.body.find(delim, head_end + 4);
        if (end == std::string::npos) return parts;
        parts.push_back({field(head, "Content-Range"), field(head, "Content-Type"),
                         r.body.substr(head_end + 4, end - head_end - 4)});
        at = end;
    }
}

TEST_P(static_files_test, several_ranges_give_a_multipart_body) {
    start();
    for (int round = 0; round < 2; ++round) {  // a miss, then a cache hit
        auto r = get("/static/small.txt", "Range: bytes=7-12, 0-1,-3\r\n");
        ASSERT_TRUE(r);
        EXPECT_EQ(r->status, 206);
        EXPECT_EQ(field(r->head, "Content-Range"), "");
        EXPECT_EQ(r->head.find("text/plain"), std::string::npos) << "the type is given per part";
        auto parts = byteranges(*r);
        ASSERT_EQ(parts.size(), 3u) << r->body;
        EXPECT_EQ(parts[0].range, "bytes 0-1/20");
        EXPECT_EQ(parts[0].bytes, "he");
        EXPECT_EQ(parts[0].type, "text/plain; charset=utf-8");
        EXPECT_EQ(parts[1].range, "bytes 7-12/20");
        EXPECT_EQ(parts[1].bytes, "static");
        EXPECT_EQ(parts[2].range, "bytes 17-19/20");
        EXPECT_EQ(parts[2].bytes, "ld\n");
    }
    // A file past the cache's size limit: its parts are read from the file.
    auto r = get("/static/big.bin", "Range: bytes=199990-, 0-9, 100000-100099\r\n");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 206);
    auto parts = byteranges(*r);
    ASSERT_EQ(parts.size(), 3u);
    EXPECT_EQ(parts[0].range, "bytes 0-9/200000");
    EXPECT_EQ(parts[0].bytes, big_.substr(0, 10));
    EXPECT_EQ(parts[1].range, "bytes 100000-100099/200000");
    EXPECT_EQ(parts[1].bytes, big_.substr(100000, 100));
    EXPECT_EQ(parts[2].range, "bytes 199990-199999/200000");
    EXPECT_EQ(parts[2].bytes, big_.substr(199990));
    EXPECT_EQ(parts[2].type, "application/octet-stream");
    // HEAD: the same length, no body.
    auto head = get("/static/big.bin", "Range: bytes=199990-, 0-9, 100000-100099\r\n", method::head);
    ASSERT_TRUE(head);
    EXPECT_EQ(head->status, 206);
    EXPECT_EQ(field(head->head, "Content-Length"), std::to_string(r->body.size()));
    EXPECT_EQ(head->body, "");
}

// HEAD of several ranges answers with GET's head (its boundary aside, new for each answer) and
// no body: sent on one connection, HEAD then GET, the GET's answer is read whole after it.
TEST_P(static_files_test, head_of_several_ranges_has_the_head_get_has) {
    start();
    const std::string range = "Range: bytes=199990-, 0-9, 100000-100099, 12-12\r\n";
    for (const char* file : {"/static/small.txt", "/static/big.bin"}) {  // cached and not
        auto c = net::stream::connect(srv_->local_address(), 5s);
        ASSERT_TRUE(c);
        const std::string rest = std::string(file) + " HTTP/1.1\r\nHost: t\r\n" + range + "\r\n";
        ASSERT_TRUE(send_text(*c, "HEAD " + rest + "GET " + rest));
        std::string buf;
        auto h = read_reply(*c, buf, method::head);
        ASSERT_TRUE(h) << file;
        auto g = read_reply(*c, buf, method::get);
        ASSERT_TRUE(g) << file << ": bytes after the HEAD's head";
        EXPECT_EQ(g->status, 206) << file;
        EXPECT_EQ(h->status, g->status) << file;
        EXPECT_EQ(h->body, "") << file;
        EXPECT_EQ(field(h->head, "Content-Length"), std::to_string(g->body.size())) << h->head;
        EXPECT_EQ(field(g->head, "Content-Length"), std::to_string(g->body.size())) << g->head;
        const std::string type = "multipart/byteranges; boundary=";
        EXPECT_EQ(field(h->head, "Content-Type").substr(0, type.size()), type) << h->head;
        EXPECT_EQ(field(h->head, "Content-Type").size(), field(g->head, "Content-Type").size());
        for (const char* name : {"ETag", "Last-Modified", "Accept-Ranges", "Content-Range"})
            EXPECT_EQ(field(h->head, name), field(g->head, name)) << file << " " << name;
        EXPECT_EQ(field(h->head, "Transfer-Encoding"), "") << h->head;
        EXPECT_EQ(byteranges(*g).size(), std::string(file) == "/static/big.bin" ? 4u : 2u) << file;
        EXPECT_TRUE(h->keep_alive && g->keep_alive) << file;
    }
}

// What the process has read through read(2) and its kin (rchar of /proc/self/io), if the
// kernel counts it.
std::optional<uint64_t> bytes_read_by_process() {
    std::ifstream io("/proc/self/io");
    std::string name;
    uint64_t n = 0;
    while (io >> name >> n)
        if (name == "rchar:") return n;
    return std::nullopt;
}

// The parts of a HEAD's multipart body are not read: 12 MiB of them (under the 16 MiB limit)
// would show in what the process reads, as they do for GET.
TEST_P(static_files_test, head_of_several_ranges_reads_none_of_them) {
    constexpr uint64_t size = 12u << 20;
    write_file(root_ / "large.bin", "");
    fs::resize_file(root_ / "large.bin", size);  // (sparse where the filesystem can)
    start();
    const std::string range = "Range: bytes=0-9, 20-\r\n";
    const auto before_get = bytes_read_by_process();
    auto g = get("/static/large.bin", range);
    ASSERT_TRUE(g);
    EXPECT_EQ(g->status, 206);
    EXPECT_EQ(byteranges(*g).size(), 2u);
    EXPECT_GT(g->body.size(), size - 20);
    const auto after_get = bytes_read_by_process();
    if (!before_get || !after_get || *after_get - *before_get < size - 20)
        GTEST_SKIP() << "the kernel does not count the bytes a process reads (/proc/self/io)";

    auto h = get("/static/large.bin", range, method::head);
    const uint64_t read = *bytes_read_by_process() - *after_get;
    ASSERT_TRUE(h);
    EXPECT_EQ(h->status, 206);
    EXPECT_EQ(h->body, "");
    EXPECT_LT(read, 1u << 20) << "the parts were read for HEAD";
    EXPECT_EQ(field(h->head, "Content-Length"), std::to_string(g->body.size()));
}

TEST_P(static_files_test, directories_serve_their_index_and_never_a_listing) {
    start();
    auto r = get("/static/sub/");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "<p>index</p>");
    EXPECT_NE(r->head.find("text/html"), std::string::npos);
    EXPECT_EQ(get("/static/noindex/")->status, 403);
    EXPECT_EQ(get("/static/missing.txt")->status, 404);
}

TEST_P(static_files_test, every_way_out_of_the_root_is_refused) {
    start();
    // ".." segments are resolved before routing (request::path): these leave /static/ and
    // reach no route; one that climbs above "/" is a bad request.
    EXPECT_EQ(get("/static/../secret.txt")->status, 404);
    EXPECT_EQ(get("/static/sub/../../secret.txt")->status, 404);
    EXPECT_EQ(get("/static/%2e%2e/secret.txt")->status, 404);
    EXPECT_EQ(get("/static/%2E%2E/secret.txt")->status, 404);
    EXPECT_EQ(get("/static/../../secret.txt")->status, 400);
    EXPECT_EQ(get("/static/..%2fsecret.txt")->status, 400);
    EXPECT_EQ(get("/static/..%2Fsecret.txt")->status, 400);
    EXPECT_EQ(get("/static/..%5csecret.txt")->status, 400);
    EXPECT_EQ(get("/static/small.txt%00.png")->status, 400);
    EXPECT_EQ(get("/static/%zz")->status, 400);
    EXPECT_EQ(get("/static/escape.txt")->status, 403);
    auto inside = get("/static/inside.txt");
    ASSERT_TRUE(inside);
    EXPECT_EQ(inside->body, "hello, static world\n");
    // Encoded characters that are not separators are decoded.
    EXPECT_EQ(get("/static/sm%61ll.txt")->body, "hello, static world\n");
}

// Opening a FIFO for reading waits for a writer: the handler must not (it would hold its vCPU,
// this test's too). A thread opens the FIFO for writing if the answer has not come within 10 s,
// so that a server that does wait is released and the test fails instead of hanging.
TEST_P(static_files_test, a_fifo_under_the_root_is_refused_without_waiting_for_a_writer) {
    ASSERT_EQ(mkfifo((root_ / "pipe").c_str(), 0600), 0);
    start();
    std::mutex m;
    std::condition_variable cv;
    bool answered = false, released = false;
    std::thread valve([&] {
        std::unique_lock g(m);
        if (cv.wait_for(g, 10s, [&] { return answered; })) return;
        int fd = ::open((root_ / "pipe").c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0) ::close(fd);
        released = true;
    });
    auto r = get("/static/pipe");
    {
        std::lock_guard g(m);
        answered = true;
    }
    cv.notify_one();
    valve.join();
    EXPECT_FALSE(released) << "the server waited in open(2) for a writer";
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 403);
    EXPECT_EQ(get("/static/small.txt")->body, "hello, static world\n");
}

TEST_P(static_files_test, symlinks_outside_are_followed_only_when_allowed) {
    static_options o;
    o.allow_symlinks_outside_root = true;
    start(o);
    auto r = get("/static/escape.txt");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->body, "outside the root");
    EXPECT_EQ(get("/static/../secret.txt")->status, 404);
}

TEST_P(static_files_test, a_changed_file_is_served_fresh_after_revalidation) {
    static_options o;
    o.revalidate_after = 0s;
    start(o);
    EXPECT_EQ(get("/static/small.txt")->body, "hello, static world\n");
    write_file(root_ / "small.txt", "changed, and longer than before\n");
    EXPECT_EQ(get("/static/small.txt")->body, "changed, and longer than before\n");
    fs::remove(root_ / "small.txt");
    EXPECT_EQ(get("/static/small.txt")->status, 404);
}

// "Racy git": a file rewritten within one timestamp tick of its read keeps its mtime, and with
// its size unchanged looks like the bytes read. Setting the same mtime by hand makes that tick
// the test's, whatever the filesystem's granularity.
TEST_P(static_files_test, a_file_rewritten_under_the_same_mtime_and_size_is_not_served_stale) {
    start();  // revalidate_after: 1 s, so a cached file would be served without a stat
    const fs::path p = root_ / "small.txt";
    timespec now;
    ASSERT_EQ(clock_gettime(CLOCK_REALTIME, &now), 0);
    set_mtime(p, now);
    struct stat before, after;
    ASSERT_EQ(::stat(p.c_str(), &before), 0);
    auto first = get("/static/small.txt");
    ASSERT_TRUE(first);
    EXPECT_EQ(first->body, "hello, static world\n");
    const std::string etag = field(first->head, "ETag");
    ASSERT_FALSE(etag.empty());

    write_file(p, "HELLO, STATIC WORLD\n");  // the same size
    set_mtime(p, now);
    ASSERT_EQ(::stat(p.c_str(), &after), 0);
    ASSERT_EQ(after.st_size, before.st_size);
    ASSERT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
    ASSERT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
    auto second = get("/static/small.txt", "If-None-Match: " + etag + "\r\n");
    ASSERT_TRUE(second);
    EXPECT_EQ(second->status, 200) << "a 304 for the first version's ETag";
    EXPECT_EQ(second->body, "HELLO, STATIC WORLD\n");
    const std::string etag2 = field(second->head, "ETag");
    EXPECT_NE(etag2, etag);
    EXPECT_EQ(field(second->head, "Last-Modified"), field(first->head, "Last-Modified"));
    // The new version's ETag still gives a 304, and If-Match with the old one fails.
    EXPECT_EQ(get("/static/small.txt", "If-None-Match: " + etag2 + "\r\n")->status, 304);
    EXPECT_EQ(get("/static/small.txt", "If-Match: " + etag + "\r\n")->status, 412);
    EXPECT_EQ(get("/static/small.txt")->body, "HELLO, STATIC WORLD\n");
}

// A file modified well before it was read is cached as before: bytes changed behind the cache,
// with the size and mtime it had, are not seen (the limit of revalidating by them), which shows
// that the second answer came from memory although its size and mtime were checked.
TEST_P(static_files_test, a_file_older_than_its_read_is_served_from_the_cache) {
    static_options o;
    o.revalidate_after = 0s;  // every request checks the file's size and mtime
    start(o);
    const fs::path p = root_ / "small.txt";
    const time_t hour_ago = time(nullptr) - 3600;
    set_mtime(p, hour_ago);
    auto first = get("/static/small.txt");
    ASSERT_TRUE(first);
    EXPECT_EQ(first->body, "hello, static world\n");
    write_file(p, "HELLO, STATIC WORLD\n");
    set_mtime(p, hour_ago);
    auto second = get("/static/small.txt");
    ASSERT_TRUE(second);
    EXPECT_EQ(second->body, "hello, static world\n") << "read again: not cached";
    EXPECT_EQ(field(second->head, "ETag"), field(first->head, "ETag"));
}

TEST(static_files, unusable_roots_and_mime_types) {
    EXPECT_EQ(static_files("/nonexistent-gluon-root").error(), std::errc::no_such_file_or_directory);
    EXPECT_EQ(mime_type("a/b.HTML"), "text/html; charset=utf-8");
    EXPECT_EQ(mime_type("x.tar.gz"), "application/gzip");
    EXPECT_EQ(mime_type("dir.d/noext"), "application/octet-stream");
}

GLUON_ENGINE_TEST_SUITE(static_files_test);

}  // namespace
}  // namespace gluon::http
