#include "gluon/http/parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "http/corpus.h"

namespace gluon::http {
namespace {

struct parsed {
    parse_result r;
    request_head head;
    std::vector<header> fields = std::vector<header>(100);
};

parsed parse(std::string_view s, limits lim = {}) {
    parsed p;
    p.head.headers = p.fields.data();
    size_t scanned = 0;
    p.r = parse_request(s, p.head, lim, scanned);
    return p;
}

/// The status a server answers a whole request with: 0 if it is valid, the head's status, or 400
/// for a body whose framing is invalid. The body must also be exactly what framing says.
int verdict(const std::string& bytes, std::string* body = nullptr) {
    parsed p = parse(bytes);
    if (p.r.state == parse_result::invalid) return p.r.status;
    if (p.r.state != parse_result::complete) return -1;
    std::string_view rest = std::string_view(bytes).substr(p.r.consumed);
    std::string got;
    if (p.head.body == framing::length) {
        if (rest.size() < p.head.content_length) return -1;
        got = rest.substr(0, p.head.content_length);
    } else if (p.head.body == framing::chunked) {
        chunked_decoder d;
        for (;;) {
            auto st = d.next(rest);
            if (st.error) return 400;
            got += st.data;
            rest.remove_prefix(st.consumed);
            if (st.done) break;
            if (st.consumed == 0) return -1;
        }
    }
    if (body) *body = got;
    return 0;
}

TEST(http_parser, corpus_gets_the_expected_verdict) {
    auto corpus = http_testing::load_corpus();
    ASSERT_GT(corpus.size(), 40u);
    for (const auto& e : corpus) EXPECT_EQ(verdict(e.bytes), e.status) << e.name;
}

TEST(http_parser, corpus_parses_the_same_fed_one_byte_at_a_time) {
    for (const auto& e : http_testing::load_corpus()) {
        parsed whole = parse(e.bytes);
        parsed p;
        p.head.headers = p.fields.data();
        size_t scanned = 0;
        for (size_t n = 1; n <= e.bytes.size(); ++n) {
            p.r = parse_request(std::string_view(e.bytes).substr(0, n), p.head, {}, scanned);
            if (p.r.state != parse_result::incomplete) break;
        }
        EXPECT_EQ(p.r.state, whole.r.state) << e.name;
        EXPECT_EQ(p.r.status, whole.r.status) << e.name;
        EXPECT_EQ(p.r.consumed, whole.r.consumed) << e.name;
    }
}

TEST(http_parser, request_fields_are_views_trimmed_of_whitespace) {
    std::string s = "GET /a/b?x=1&y HTTP/1.1\r\nHost: example\r\nX-Empty:\r\nX-Pad: \t v a l \t\r\n\r\nrest";
    parsed p = parse(s);
    ASSERT_EQ(p.r.state, parse_result::complete);
    EXPECT_EQ(p.r.consumed, s.size() - 4);
    EXPECT_EQ(p.head.verb, method::get);
    EXPECT_EQ(p.head.target, "/a/b?x=1&y");
    EXPECT_EQ(p.head.host, "example");
    EXPECT_EQ(p.head.header_count, 3u);
    EXPECT_EQ(p.head.find("x-empty"), "");
    EXPECT_EQ(p.head.find("X-PAD"), "v a l");
    EXPECT_GE(p.head.find("host").data(), s.data());
    EXPECT_LT(p.head.find("host").data(), s.data() + s.size());
    EXPECT_TRUE(p.head.keep_alive);
    EXPECT_EQ(p.head.body, framing::none);
}

TEST(http_parser, connection_semantics_follow_the_version) {
    EXPECT_FALSE(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").head.keep_alive);
    EXPECT_FALSE(parse("GET / HTTP/1.0\r\n\r\n").head.keep_alive);
    EXPECT_TRUE(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n").head.keep_alive);
    EXPECT_FALSE(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, close\r\n\r\n").head.keep_alive);
    auto up = parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
    EXPECT_TRUE(up.head.upgrade);
    EXPECT_TRUE(parse("POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 1\r\n\r\n")
                    .head.expect_continue);
}

TEST(http_parser, methods_are_classified_and_unknown_tokens_kept) {
    EXPECT_EQ(parse("DELETE / HTTP/1.1\r\nHost: a\r\n\r\n").head.verb, method::delete_);
    auto p = parse("PROPFIND / HTTP/1.1\r\nHost: a\r\n\r\n");
    EXPECT_EQ(p.head.verb, method::other);
    EXPECT_EQ(p.head.method_name, "PROPFIND");
}

TEST(http_parser, request_targets_take_one_of_the_four_forms_their_method_allows) {
    std::string req;  // the views of a result point into it until the next call
    auto target_of = [&](std::string_view line) {
        req = std::string(line) + " HTTP/1.1\r\nHost: a\r\n\r\n";
        return parse(req);
    };
    auto p = target_of("GET /a/b?x=1&y");
    ASSERT_EQ(p.r.state, parse_result::complete);
    EXPECT_EQ(p.head.path, "/a/b");
    EXPECT_EQ(p.head.query, "x=1&y");
    EXPECT_EQ(p.head.target_authority, "");
    p = target_of("OPTIONS *");
    ASSERT_EQ(p.r.state, parse_result::complete);
    EXPECT_EQ(p.head.path, "*");
    p = target_of("CONNECT example.com:443");
    ASSERT_EQ(p.r.state, parse_result::complete);
    EXPECT_EQ(p.head.path, "example.com:443");
    EXPECT_EQ(target_of("CONNECT [2001:db8::1]:443").r.state, parse_result::complete);
    EXPECT_EQ(target_of("HEAD HTTPS://h/").r.state, parse_result::complete);
    EXPECT_EQ(target_of("GET http://[2001:db8::1]:8080/").r.state, parse_result::complete);
    for (const char* bad : {"GET foo", "GET *", "POST a:80", "GET /a#b", "GET http://a/#f", "CONNECT /",
                            "CONNECT a", "CONNECT a:", "CONNECT a:x", "CONNECT http://a:80", "OPTIONS a:80",
                            "GET ftp://a/", "GET http:/a", "GET http:///x", "GET http://u@a/",
                            "GET http://a<b/", "GET http://[::1/", "GET http://[zz]/", "GET http://a:8x/",
                            "GET http://a%2/"}) {
        auto b = target_of(bad);
        EXPECT_EQ(b.r.state, parse_result::invalid) << bad;
        EXPECT_EQ(b.r.status, 400) << bad;
    }
}

TEST(http_parser, an_absolute_form_target_gives_host_path_and_query) {
    // The authority names the host; the Host field is ignored (RFC 9112 3.2.2).
    auto p = parse("GET http://h.example:8080/p/q?x=1 HTTP/1.1\r\nHost: other\r\n\r\n");
    ASSERT_EQ(p.r.state, parse_result::complete);
    EXPECT_EQ(p.head.host, "h.example:8080");
    EXPECT_EQ(p.head.path, "/p/q");
    EXPECT_EQ(p.head.query, "x=1");
    // No path: it is "/", and a query stays the query, even with a '/' in it.
    p = parse("GET http://h?x=/y HTTP/1.1\r\nHost: h\r\n\r\n");
    ASSERT_EQ(p.r.state, parse_result::complete);
    EXPECT_EQ(p.head.host, "h");
    EXPECT_EQ(p.head.path, "/");
    EXPECT_EQ(p.head.query, "x=/y");
    p = parse("GET https://h HTTP/1.0\r\n\r\n");
    ASSERT_EQ(p.r.state, parse_result::complete);
    EXPECT_EQ(p.head.host, "h");
    EXPECT_EQ(p.head.path, "/");
    EXPECT_EQ(p.head.query, "");
    // HTTP/1.1 still needs the Host field.
    EXPECT_EQ(parse("GET http://h/ HTTP/1.1\r\n\r\n").r.status, 400);
}

TEST(http_parser, a_host_that_is_not_uri_host_and_port_is_400) {
    std::string req;
    auto with_host = [&](std::string_view host) {
        req = "GET / HTTP/1.1\r\nHost: " + std::string(host) + "\r\n\r\n";
        return parse(req);
    };
    for (const char* good : {"example.com", "example.com:8080", "192.0.2.1:80", "[2001:db8::1]",
                             "[::ffff:192.0.2.1]:443", "[v1.x]", "a%20b", "h:", ""}) {
        auto p = with_host(good);
        EXPECT_EQ(p.r.state, parse_result::complete) << good;
        EXPECT_EQ(p.head.host, good);
    }
    for (const char* bad : {"a b", "a\tb", "u@a", "a/b", "a?b", "a#b", "a:8x", "a:80:80", "[::1", "[zz]",
                            "[::1]x", "a%2", "a%zz", "a\"b"}) {
        auto p = with_host(bad);
        EXPECT_EQ(p.r.state, parse_result::invalid) << bad;
        EXPECT_EQ(p.r.status, 400) << bad;
    }
    // Whatever the version, and even where an absolute-form target names the host.
    EXPECT_EQ(parse("GET / HTTP/1.0\r\nHost: a b\r\n\r\n").r.status, 400);
    EXPECT_EQ(parse("GET http://h/ HTTP/1.1\r\nHost: a b\r\n\r\n").r.status, 400);
}

TEST(http_parser, limits_give_414_and_431) {
    limits lim;
    lim.max_head_bytes = 1024;
    lim.max_headers = 10;
    std::string long_target = "GET /" + std::string(2000, 'a') + " HTTP/1.1\r\nHost: a\r\n\r\n";
    EXPECT_EQ(parse(long_target, lim).r.status, 414);
    // Without its end yet: the limit is enforced on what has arrived.
    EXPECT_EQ(parse(long_target.substr(0, 1500), lim).r.status, 414);
    std::string big = "GET / HTTP/1.1\r\nHost: a\r\nX: " + std::string(2000, 'b') + "\r\n\r\n";
    EXPECT_EQ(parse(big, lim).r.status, 431);
    std::string many = "GET / HTTP/1.1\r\nHost: a\r\n";
    for (int i = 0; i < 10; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
    EXPECT_EQ(parse(many + "\r\n", lim).r.status, 431);
    std::string ten_thousand = "GET / HTTP/1.1\r\nHost: a\r\n";
    for (int i = 0; i < 10000; ++i) ten_thousand += "X: v\r\n";
    EXPECT_EQ(parse(ten_thousand + "\r\n").r.status, 431);
    // Empty lines before a request count toward the limit too.
    std::string empty_lines;
    for (int i = 0; i < 2000; ++i) empty_lines += "\r\n";
    EXPECT_EQ(parse(empty_lines + "GET / HTTP/1.1\r\nHost: a\r\n\r\n", lim).r.status, 400);
}

TEST(http_parser, incomplete_heads_wait_for_more) {
    EXPECT_EQ(parse("").r.state, parse_result::incomplete);
    EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: a\r\n").r.state, parse_result::incomplete);
    EXPECT_EQ(parse("GET / HTTP/1.1\r\nHost: a\r\n\r").r.state, parse_result::incomplete);
    EXPECT_EQ(parse("\r\n").r.state, parse_result::incomplete);
}

TEST(http_parser, content_length_sets_framing) {
    auto p = parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n");
    EXPECT_EQ(p.head.body, framing::none);
    p = parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 123456789012\r\n\r\n");
    EXPECT_EQ(p.head.body, framing::length);
    EXPECT_EQ(p.head.content_length, 123456789012u);
}

TEST(http_parser, corpus_bodies_decode_to_their_content) {
    std::string body;
    for (const auto& e : http_testing::load_corpus()) {
        if (e.name == "ok-chunked" || e.name == "ok-cl-body") {
            ASSERT_EQ(verdict(e.bytes, &body), 0);
            EXPECT_EQ(body, "hello") << e.name;
        }
        if (e.name == "ok-chunked-ext-trailer") {
            ASSERT_EQ(verdict(e.bytes, &body), 0);
            EXPECT_EQ(body, "helloabc");
        }
    }
}

TEST(http_chunked, decodes_across_any_split) {
    std::string enc = "4\r\nWiki\r\n5;x=y\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nT: v\r\n\r\nNEXT";
    for (size_t split = 0; split <= enc.size(); ++split) {
        chunked_decoder d;
        std::string out, pending;
        std::string_view parts[2] = {std::string_view(enc).substr(0, split), std::string_view(enc).substr(split)};
        size_t used_total = 0;
        for (auto part : parts) {
            pending += part;
            for (;;) {
                auto st = d.next(pending);
                ASSERT_FALSE(st.error) << split << st.why;
                out += st.data;
                pending.erase(0, st.consumed);
                used_total += st.consumed;
                if (st.done || st.consumed == 0) break;
            }
        }
        ASSERT_TRUE(d.done()) << split;
        EXPECT_EQ(out, "Wikipedia in\r\n\r\nchunks.");
        EXPECT_EQ(pending, "NEXT");
        EXPECT_EQ(d.total(), out.size());
    }
}

TEST(http_chunked, rejects_what_rfc_9112_forbids) {
    for (const char* bad : {"g\r\n", "\r\n", "5\n", "5 x\r\n", "5;\x01\r\n", "11111111111111111\r\n",
                            "1\r\naXY", "0\r\nbad trailer\r\n\r\n", "0\r\n: v\r\n\r\n"}) {
        chunked_decoder d;
        std::string_view in = bad;
        bool failed = false;
        for (int i = 0; i < 10 && !failed; ++i) {
            auto st = d.next(in);
            failed = st.error;
            in.remove_prefix(st.consumed);
            if (st.consumed == 0 && st.data.empty()) break;
        }
        EXPECT_TRUE(failed) << bad;
    }
    chunked_decoder small(16);
    EXPECT_TRUE(small.next(std::string(40, '1')).error);
}

TEST(http_response_parser, framing_follows_status_and_request_method) {
    std::vector<header> f(100);
    auto resp = [&](std::string_view s, method m = method::get) {
        response_head h;
        h.headers = f.data();
        size_t scanned = 0;
        auto r = parse_response(s, h, {}, scanned, m);
        return std::pair{r, h};
    };
    auto [r1, h1] = resp("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n");
    ASSERT_EQ(r1.state, parse_result::complete);
    EXPECT_EQ(h1.status, 200);
    EXPECT_EQ(h1.reason, "OK");
    EXPECT_EQ(h1.body, framing::length);
    EXPECT_EQ(resp("HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", method::head).second.body, framing::none);
    EXPECT_EQ(resp("HTTP/1.1 304 Not Modified\r\nContent-Length: 12\r\n\r\n").second.body, framing::none);
    EXPECT_EQ(resp("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").second.body, framing::chunked);
    auto [r2, h2] = resp("HTTP/1.1 200\r\n\r\n");
    EXPECT_EQ(h2.body, framing::to_close);
    EXPECT_FALSE(h2.keep_alive);
    EXPECT_EQ(h2.reason, "");
    EXPECT_EQ(resp("HTTP/1.1 2000 OK\r\n\r\n").first.state, parse_result::invalid);
    EXPECT_EQ(resp("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n").first.state,
              parse_result::invalid);
}

}  // namespace
}  // namespace gluon::http
