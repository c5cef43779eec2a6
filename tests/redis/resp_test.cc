// The RESP2/RESP3 codec: every reply kind, replies cut at every byte, and bytes that are not
// RESP or break a limit.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "redis/resp.h"

namespace gluon::redis::detail {
namespace {

reply must_decode(const std::string& s) {
    reply r;
    size_t used = 0;
    EXPECT_EQ(decode(s.data(), s.size(), r, used), decode_status::complete) << s;
    EXPECT_EQ(used, s.size()) << s;
    return r;
}

TEST(resp, encodes_commands_as_bulk_arrays) {
    std::string out;
    std::vector<std::string_view> args{"SET", "k", std::string_view("a\r\nb\0", 5)};
    encode_command(out, args);
    EXPECT_EQ(out, std::string("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\na\r\nb\0\r\n", 31));
}

TEST(resp, decodes_every_kind) {
    EXPECT_EQ(must_decode("+OK\r\n").str, "OK");
    auto e = must_decode("-ERR wrong\r\n");
    EXPECT_TRUE(e.is_error());
    EXPECT_EQ(e.str, "ERR wrong");
    EXPECT_EQ(must_decode(":-42\r\n").integer, -42);
    EXPECT_EQ(must_decode("$5\r\nhe\r\no\r\n").str, "he\r\no");
    EXPECT_EQ(must_decode("$0\r\n\r\n").type, reply::kind::bulk);
    EXPECT_TRUE(must_decode("$-1\r\n").is_nil());
    EXPECT_TRUE(must_decode("*-1\r\n").is_nil());
    EXPECT_TRUE(must_decode("_\r\n").is_nil());
    EXPECT_EQ(must_decode(",3.25\r\n").number, 3.25);
    EXPECT_EQ(must_decode(",-inf\r\n").number, -__builtin_inf());
    EXPECT_EQ(must_decode("#t\r\n").integer, 1);
    EXPECT_EQ(must_decode("#f\r\n").integer, 0);
    EXPECT_EQ(must_decode("(3492890328409238509324850943850943825024385\r\n").str,
              "3492890328409238509324850943850943825024385");
    auto v = must_decode("=15\r\ntxt:Some string\r\n");
    EXPECT_EQ(v.type, reply::kind::verbatim);
    EXPECT_EQ(v.str, "Some string");
    auto be = must_decode("!21\r\nSYNTAX invalid syntax\r\n");
    EXPECT_TRUE(be.is_error());
    EXPECT_EQ(be.str, "SYNTAX invalid syntax");
    auto a = must_decode("*3\r\n:1\r\n$1\r\nx\r\n*1\r\n+y\r\n");
    ASSERT_EQ(a.elements.size(), 3u);
    EXPECT_EQ(a.elements[1].str, "x");
    EXPECT_EQ(a.elements[2].elements[0].str, "y");
    auto m = must_decode("%2\r\n+a\r\n:1\r\n+b\r\n:2\r\n");
    EXPECT_EQ(m.type, reply::kind::map);
    ASSERT_EQ(m.elements.size(), 4u);
    EXPECT_EQ(m.elements[2].str, "b");
    EXPECT_EQ(m.elements[3].integer, 2);
    EXPECT_EQ(must_decode("~2\r\n+a\r\n+b\r\n").type, reply::kind::set);
    EXPECT_EQ(must_decode(">3\r\n+message\r\n+ch\r\n+hi\r\n").type, reply::kind::push);
    // Attributes describe the reply after them; the reply is what is kept.
    auto at = must_decode("|1\r\n+key-popularity\r\n%1\r\n$1\r\na\r\n,0.19\r\n*1\r\n:7\r\n");
    EXPECT_EQ(at.type, reply::kind::array);
    EXPECT_EQ(at.elements[0].integer, 7);
}

TEST(resp, a_reply_cut_anywhere_is_incomplete_and_then_complete) {
    const std::string whole = "*4\r\n$5\r\nhello\r\n%1\r\n+k\r\n,1.5\r\n:-7\r\n*2\r\n$-1\r\n_\r\n+next";
    const size_t first = whole.size() - 5;  // "+next" is the start of another reply
    for (size_t cut = 0; cut < first; ++cut) {
        reply r;
        size_t used = 0;
        EXPECT_EQ(decode(whole.data(), cut, r, used), decode_status::incomplete) << cut;
    }
    reply r;
    size_t used = 0;
    ASSERT_EQ(decode(whole.data(), whole.size(), r, used), decode_status::complete);
    EXPECT_EQ(used, first);
    EXPECT_EQ(r.elements[0].str, "hello");
    EXPECT_EQ(r.elements[1].elements[1].number, 1.5);
}

// The scanner says a reply is whole exactly when decode() can decode it, fed a byte at a time
// (each call going on from the last), for every kind and nesting.
TEST(resp, the_scanner_finds_each_reply_end_resumably) {
    const std::string replies[] = {
        "+OK\r\n", "-ERR x\r\n", ":42\r\n", "$5\r\nhe\r\no\r\n", "$0\r\n\r\n", "$-1\r\n", "*-1\r\n", "*0\r\n",
        "*3\r\n:1\r\n$1\r\nx\r\n*1\r\n+y\r\n", "%2\r\n+a\r\n:1\r\n+b\r\n*2\r\n:2\r\n:3\r\n",
        "~2\r\n+a\r\n+b\r\n", ">2\r\n+message\r\n$3\r\nabc\r\n", "|1\r\n+key\r\n+val\r\n:7\r\n",
        "*2\r\n|1\r\n+k\r\n+v\r\n$2\r\nab\r\n:9\r\n", "=15\r\ntxt:Some string\r\n", "_\r\n", "#t\r\n", ",3.5\r\n",
        "*2\r\n*2\r\n*0\r\n*-1\r\n$-1\r\n"};
    for (const std::string& whole : replies) {
        const std::string buf = whole + "+NEXT\r\n";  // the next reply already behind it
        reply_scanner sc;
        for (size_t n = 1; n <= whole.size(); ++n) {
            const bool ready = sc.ready(buf.data(), n);
            reply r;
            size_t used = 0;
            const bool decodes = decode(buf.data(), n, r, used) == decode_status::complete;
            ASSERT_EQ(ready, n == whole.size()) << whole << " at " << n;
            ASSERT_EQ(decodes, n == whole.size()) << whole << " at " << n;
        }
        reply r;
        size_t used = 0;
        ASSERT_EQ(decode(buf.data(), buf.size(), r, used), decode_status::complete);
        EXPECT_EQ(used, whole.size());
    }
    reply_scanner junk;
    EXPECT_TRUE(junk.ready("?what\r\n", 7));  // not RESP: decode() reports it
}

// The scanner applies decode()'s limits to each header as it reads it: a length or count over
// them, or an element nested deeper, is ready at once (for decode() to refuse), never waited
// for. It waited for whatever a bulk header claimed up to 1 TiB, so a hostile "$1000000000"
// kept the connection buffering until its command timed out.
TEST(resp, the_scanner_stops_at_a_header_over_the_limits) {
    decode_limits lim;
    lim.max_bulk = 1024;
    lim.max_elements = 16;
    lim.max_depth = 4;
    for (std::string bad : {"$2048\r\n", "!2048\r\n", "=2048\r\n", "*17\r\n", "~17\r\n", ">17\r\n", "%17\r\n",
                            "|17\r\n", "*2\r\n:1\r\n$2048\r\n", "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n$3\r\nab"}) {
        reply_scanner sc;
        EXPECT_TRUE(sc.ready(bad.data(), bad.size(), lim)) << bad;
        reply r;
        size_t used = 0;
        EXPECT_EQ(decode(bad.data(), bad.size(), r, used, lim), decode_status::invalid) << bad;
    }
    // At the limits, the rest is waited for.
    for (std::string partial : {"$1024\r\nab", "*16\r\n:1\r\n", "%16\r\n", "*1\r\n*1\r\n*1\r\n*1\r\n$3\r\nab"}) {
        reply_scanner sc;
        EXPECT_FALSE(sc.ready(partial.data(), partial.size(), lim)) << partial;
    }
    // The default limits: a string is at most 512 MiB.
    const std::string huge = "$1000000000\r\n";
    reply_scanner sc;
    EXPECT_TRUE(sc.ready(huge.data(), huge.size()));
    reply r;
    size_t used = 0;
    EXPECT_EQ(decode(huge.data(), huge.size(), r, used), decode_status::invalid);
}

// A reply of many elements arriving in 16 KiB pieces: the scanner, going on from where it
// stopped, says it is whole only with its last piece, when it decodes entire.
TEST(resp, a_large_reply_in_pieces_is_ready_only_with_its_last) {
    constexpr int k_n = 200000;
    std::string big = "*" + std::to_string(k_n) + "\r\n";
    for (int i = 0; i < k_n; ++i) big += "$6\r\nvalue" + std::to_string(i % 10) + "\r\n";
    reply_scanner sc;
    for (size_t n = 16 * 1024;; n += 16 * 1024) {
        n = std::min(n, big.size());
        if (sc.ready(big.data(), n)) {
            EXPECT_EQ(n, big.size());
            reply r;
            size_t used = 0;
            ASSERT_EQ(decode(big.data(), n, r, used), decode_status::complete);
            EXPECT_EQ(r.elements.size(), static_cast<size_t>(k_n));
            EXPECT_EQ(used, big.size());
            break;
        }
        ASSERT_LT(n, big.size());
    }
}

// Nested aggregate headers all claim the same remaining bytes: nothing is allocated for
// elements before they decode (it used to be 80 MB per header level here).
TEST(resp, nested_headers_allocate_nothing_ahead_of_their_elements) {
    std::string hostile;
    for (int i = 0; i < 8; ++i) hostile += "*1000000\r\n";
    hostile += std::string(3'000'100, '?');
    reply r;
    size_t used = 0;
    EXPECT_EQ(decode(hostile.data(), hostile.size(), r, used), decode_status::invalid);
    const reply* level = &r;
    for (int i = 0; i < 8 && level; ++i) {
        EXPECT_LE(level->elements.capacity(), 16u) << "level " << i;
        level = level->elements.empty() ? nullptr : &level->elements.back();
    }
}

// A double is RESP3's syntax and nothing else: an optional sign, digits, a decimal point, an
// exponent, or inf, -inf, nan. strtod also took spaces before it, hex and "infinity".
TEST(resp, doubles_are_read_as_resp_writes_them) {
    EXPECT_EQ(must_decode(",+2.5\r\n").number, 2.5);
    EXPECT_EQ(must_decode(",-0.125\r\n").number, -0.125);
    EXPECT_EQ(must_decode(",1.5e3\r\n").number, 1500);
    EXPECT_EQ(must_decode(",2E-2\r\n").number, 0.02);
    EXPECT_EQ(must_decode(",10\r\n").number, 10);
    EXPECT_EQ(must_decode(",inf\r\n").number, __builtin_inf());
    EXPECT_NE(must_decode(",nan\r\n").number, must_decode(",nan\r\n").number);
    for (std::string bad : {",\r\n", ", 3.14\r\n", ",3.14 \r\n", ",0x10\r\n", ",infinity\r\n", ",+inf\r\n",
                            ",+-1\r\n", ",1e400\r\n", ",3,14\r\n"}) {
        reply r;
        size_t used = 0;
        EXPECT_EQ(decode(bad.data(), bad.size(), r, used), decode_status::invalid) << bad;
    }
}

TEST(resp, garbage_and_limits_are_invalid) {
    decode_limits lim;
    lim.max_bulk = 1024;
    lim.max_elements = 16;
    lim.max_depth = 4;
    for (std::string bad : {"?\r\n", "+a\rb\r\n", ":12x\r\n", ":\r\n", "$-2\r\n", "$2048\r\n", "$3\r\nabcd\r\n",
                            "*17\r\n", "%-1\r\n", "~-1\r\n", "#x\r\n", ",1.5.2\r\n", "(12a\r\n", "=3\r\nabc\r\n",
                            "_x\r\n", "*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", "$99999999999999999999\r\n"}) {
        reply r;
        size_t used = 0;
        EXPECT_EQ(decode(bad.data(), bad.size(), r, used, lim), decode_status::invalid) << bad;
    }
    // A header line that never ends is not waited for forever.
    std::string endless(70 * 1024, 'a');
    endless[0] = '+';
    reply r;
    size_t used = 0;
    EXPECT_EQ(decode(endless.data(), endless.size(), r, used), decode_status::invalid);
}

}  // namespace
}  // namespace gluon::redis::detail
