// WebSocket: the frame codec and UTF-8 validator alone, then a gluon server and client on every
// engine, then hostile clients written byte by byte (each must get the RFC's close code).
#include "gluon/http/websocket.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "../../src/http/websocket_frame.h"
#include "../../src/http/websocket_handshake.h"
#include "../../src/http/websocket_utf8.h"
#include "gluon/http/server.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sync/channel.h"
#include "gluon/sync/semaphore.h"
#include "http/websocket_support.h"
#include "test_support.h"

namespace gluon::http {
namespace {

using namespace std::chrono_literals;
using namespace ws_testing;

// ---- codec ------------------------------------------------------------------------------------

TEST(http_websocket_codec, heads_round_trip) {
    for (uint64_t len : {0ull, 1ull, 125ull, 126ull, 65535ull, 65536ull, 1ull << 40}) {
        for (bool masked : {false, true}) {
            uint8_t buf[ws::k_max_head];
            size_t n = ws::encode_head(buf, ws::op_binary, true, len, masked, 0x11223344);
            ws::frame_head h;
            for (size_t cut = 0; cut < n; ++cut)
                EXPECT_EQ(ws::decode_head(buf, cut, masked, h).state, ws::decode_result::incomplete);
            auto r = ws::decode_head(buf, n, masked, h);
            ASSERT_EQ(r.state, ws::decode_result::complete);
            EXPECT_EQ(h.length, len);
            EXPECT_EQ(h.head_bytes, n);
            EXPECT_TRUE(h.fin);
            EXPECT_EQ(h.masked, masked);
            if (masked) {
                EXPECT_EQ(h.mask, 0x11223344u);
            }
        }
    }
}

TEST(http_websocket_codec, invalid_heads_are_protocol_errors) {
    struct bad_case {
        std::vector<uint8_t> bytes;
        bool from_client;
    };
    std::vector<bad_case> cases = {
        {{0x81, 0x02}, true},                    // unmasked client frame
        {{0x81, 0x82, 0, 0, 0, 0}, false},       // masked server frame
        {{0xc1, 0x80, 0, 0, 0, 0}, true},        // RSV1
        {{0xa1, 0x80, 0, 0, 0, 0}, true},        // RSV2
        {{0x83, 0x80, 0, 0, 0, 0}, true},        // reserved data opcode
        {{0x8b, 0x80, 0, 0, 0, 0}, true},        // reserved control opcode
        {{0x09, 0x80, 0, 0, 0, 0}, true},        // fragmented ping
        {{0x89, 0xfe, 0, 126}, true},            // ping over 125 bytes
        {{0x82, 0xff, 0x80, 0, 0, 0, 0, 0, 0, 0}, true},  // 64-bit length, top bit set
    };
    for (auto& c : cases) {
        ws::frame_head h;
        auto r = ws::decode_head(c.bytes.data(), c.bytes.size(), c.from_client, h);
        EXPECT_EQ(r.state, ws::decode_result::invalid) << int(c.bytes[0]) << " " << int(c.bytes[1]);
        EXPECT_EQ(r.close_code, 1002);
    }
}

TEST(http_websocket_codec, masking_in_pieces_equals_masking_whole) {
    std::string data(1000, '\0');
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
    auto* src = reinterpret_cast<const uint8_t*>(data.data());
    std::vector<uint8_t> whole(data.size()), pieces(data.size());
    ws::mask_copy(whole.data(), src, data.size(), 0xdeadbeef, 0);
    for (size_t off = 0; off < data.size();) {
        size_t k = std::min<size_t>(data.size() - off, 1 + off % 13);
        ws::mask_copy(pieces.data() + off, src + off, k, 0xdeadbeef, off);
        off += k;
    }
    EXPECT_EQ(whole, pieces);
    ws::mask_copy(whole.data(), whole.data(), whole.size(), 0xdeadbeef, 0);
    EXPECT_EQ(std::string(whole.begin(), whole.end()), data);
}

TEST(http_websocket_codec, utf8_validation) {
    auto valid = [](std::string_view s) {
        ws::utf8_validator v;
        return v.feed(reinterpret_cast<const uint8_t*>(s.data()), s.size()) && v.complete();
    };
    EXPECT_TRUE(valid("plain ascii text, long enough for the 8-byte path"));
    EXPECT_TRUE(valid("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf\xed\x9f\xbf"));
    for (std::string_view bad : {"\xc3\x28", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80",
                                 "\xf5\x80\x80\x80", "\x80", "\xfe", "\xe2\x82"})
        EXPECT_FALSE(valid(bad)) << testing::PrintToString(bad);
    // Across fragments: a character split anywhere is still one character.
    std::string euro = "\xe2\x82\xac";
    for (size_t cut = 0; cut <= euro.size(); ++cut) {
        ws::utf8_validator v;
        auto* p = reinterpret_cast<const uint8_t*>(euro.data());
        EXPECT_TRUE(v.feed(p, cut));
        EXPECT_TRUE(v.feed(p + cut, euro.size() - cut));
        EXPECT_TRUE(v.complete());
    }
    ws::utf8_validator v;  // fails at the first bad byte, before the message ends
    EXPECT_FALSE(v.feed(reinterpret_cast<const uint8_t*>("\xce\xba\xe1\xbd\xb9\xf4\x90"), 7));
}

TEST(http_websocket_codec, accept_value_of_the_rfc_example) {
    EXPECT_EQ(ws::accept_value("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    EXPECT_EQ(ws::base64_decoded_length("dGhlIHNhbXBsZSBub25jZQ=="), 16);
    EXPECT_EQ(ws::base64_decoded_length("dGhlIHNhbXBsZSBub25jZQ"), -1);
    EXPECT_EQ(ws::base64_decoded_length(ws::new_key()), 16);
    EXPECT_TRUE(ws::has_token("keep-alive, Upgrade", "upgrade"));
    EXPECT_FALSE(ws::has_token("keep-alive, upgraded", "upgrade"));
    EXPECT_TRUE(ws::has_exact_token("chat.v1, Chat.v2", "Chat.v2"));
    EXPECT_FALSE(ws::has_exact_token("chat.v1, Chat.v2", "chat.v2"));
    EXPECT_FALSE(ws::has_exact_token("chat.v1", "chat"));
}

// ---- gluon server and client ------------------------------------------------------------------

class http_websocket_test : public ws_fixture {};
GLUON_ENGINE_TEST_SUITE(http_websocket_test);

TEST_P(http_websocket_test, echo_text_binary_and_large_messages) {
    start_echo();
    auto c = websocket::connect(url("/echo"));
    ASSERT_TRUE(c) << c.error().message();
    ASSERT_TRUE(c->send_text("hello", 5s));
    auto m = c->recv(5s);
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_TRUE(m->is_text());
    EXPECT_EQ(m->data, "hello");
    std::string big(3 << 20, 'x');
    for (size_t i = 0; i < big.size(); i += 4097) big[i] = static_cast<char>(i);
    ASSERT_TRUE(c->send_binary(big, 5s));
    m = c->recv(5s);
    ASSERT_TRUE(m);
    EXPECT_FALSE(m->is_text());
    EXPECT_EQ(m->data, big);
    ASSERT_TRUE(c->send_binary("", 5s));
    m = c->recv(5s);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->data, "");
    ASSERT_TRUE(c->close(close_code::normal, "done", 5s));
    auto end = server_result();
    EXPECT_EQ(end.err, ENODATA);
    EXPECT_EQ(end.code, close_code::normal);
    EXPECT_EQ(end.reason, "done");
    EXPECT_EQ(c->close_status(), close_code::normal);  // the server echoed it
}

TEST_P(http_websocket_test, fragments_and_pings_between_them) {
    start_echo();
    auto c = websocket::connect(url("/echo"));
    ASSERT_TRUE(c);
    ASSERT_TRUE(c->send_fragment(websocket::kind::text, "Hel", true, false, 5s));
    ASSERT_TRUE(c->ping("between", 5s));
    ASSERT_TRUE(c->send_fragment(websocket::kind::text, "lo \xe2\x82", false, false, 5s));
    ASSERT_TRUE(c->send_fragment(websocket::kind::text, "\xac", false, true, 5s));
    auto m = c->recv(5s);  // the pong is consumed on the way
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_TRUE(m->is_text());
    EXPECT_EQ(m->data, "Hello \xe2\x82\xac");
}

// A message may not begin inside another's fragments, nor a continuation without a first
// fragment (RFC 6455 5.4): such a send is refused and the connection kept. Both went out, and
// the peer failed the connection (1002).
TEST_P(http_websocket_test, a_send_that_would_interleave_messages_is_refused) {
    auto pair = net::stream::pair();
    ASSERT_TRUE(pair);
    auto srv = websocket::over(pair->first, true);
    auto cli = websocket::over(pair->second, false);
    ASSERT_TRUE(srv && cli);
    auto r = cli->send_fragment(websocket::kind::text, "orphan", false, true, 5s);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::invalid_argument);
    ASSERT_TRUE(cli->send_fragment(websocket::kind::text, "Hel", true, false, 5s));
    r = cli->send_binary("between", 5s);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::invalid_argument);
    r = cli->send_fragment(websocket::kind::binary, "new", true, true, 5s);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::invalid_argument);
    ASSERT_TRUE(cli->ping("ok", 5s));  // control frames may go between fragments
    ASSERT_TRUE(cli->send_fragment(websocket::kind::text, "lo", false, true, 5s));
    ASSERT_TRUE(cli->send_text("next", 5s));
    auto m = srv->recv(5s);
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_EQ(m->data, "Hello");
    m = srv->recv(5s);
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_EQ(m->data, "next");
    EXPECT_TRUE(cli->is_open());
    EXPECT_TRUE(srv->is_open());
}

TEST_P(http_websocket_test, server_initiated_close_and_subprotocol) {
    websocket_options so;
    so.subprotocols = {"chat.v2", "chat.v1"};
    start_echo(so);
    websocket_options co;
    co.subprotocols = {"chat.v1", "chat.v2"};
    auto c = websocket::connect(url("/echo"), co);
    ASSERT_TRUE(c);
    EXPECT_EQ(c->subprotocol(), "chat.v2");  // the server's preference
    ASSERT_TRUE(c->send_text("close-me", 5s));
    auto m = c->recv(5s);
    ASSERT_FALSE(m);
    EXPECT_EQ(m.error(), std::errc::no_message_available);
    EXPECT_EQ(c->close_status(), 4000);
    EXPECT_EQ(c->close_reason(), "bye");
    EXPECT_FALSE(c->is_open());
    EXPECT_EQ(server_result().err, 0);  // the server's close() completed
}

// Subprotocol names match exactly on both sides (RFC 7936). The server matched them ignoring
// case and answered with its own spelling, which the client (matching exactly) refused: an
// offer of "Chat" to a server speaking "chat" failed the handshake instead of agreeing on none.
TEST_P(http_websocket_test, subprotocols_match_case_sensitively) {
    websocket_options so;
    so.subprotocols = {"chat", "Echo"};
    start_echo(so);
    websocket_options co;
    co.subprotocols = {"Chat"};
    auto c = websocket::connect(url("/echo"), co);
    ASSERT_TRUE(c) << c.error().message();
    EXPECT_EQ(c->subprotocol(), "");  // none agreed on
    co.subprotocols = {"echo", "Echo"};
    c = websocket::connect(url("/echo"), co);
    ASSERT_TRUE(c) << c.error().message();
    EXPECT_EQ(c->subprotocol(), "Echo");
}

// A request may split its Sec-WebSocket-Protocol list over several field lines (RFC 6455
// 11.3.4): the server reads them all. It read only the first, so here it chose chat.v1 (the
// only one it saw) over chat.v3, which it prefers, and a client offering chat.v3 on its second
// line only got no subprotocol.
TEST_P(http_websocket_test, a_subprotocol_list_over_several_request_fields_is_one_list) {
    websocket_options so;
    so.subprotocols = {"chat.v3", "chat.v1"};
    start_echo(so);
    const std::string upgrade = "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
    struct offer_case {
        std::string fields;
        std::string chosen;
    };
    const offer_case cases[] = {
        {"Sec-WebSocket-Protocol: chat.v1\r\nSec-WebSocket-Protocol: chat.v2, chat.v3\r\n", "chat.v3"},
        {"Sec-WebSocket-Protocol: chat.v2\r\nsec-websocket-protocol: chat.v1\r\n", "chat.v1"},
        {"Sec-WebSocket-Protocol: chat.v2\r\nSec-WebSocket-Protocol: \r\n", ""},
    };
    for (const auto& c : cases) {
        auto s = raw_connect();
        std::string rest;
        const std::string head = raw_handshake(s, upgrade + c.fields, rest);
        EXPECT_EQ(head.rfind("HTTP/1.1 101 ", 0), 0u) << head;
        if (c.chosen.empty())
            EXPECT_EQ(head.find("Sec-WebSocket-Protocol"), std::string::npos) << head;
        else
            EXPECT_NE(head.find("Sec-WebSocket-Protocol: " + c.chosen + "\r\n"), std::string::npos) << head;
        (void)s.close();
    }
}

// Upgrade and Connection are lists that a request may split over several field lines (RFC 9110
// 5.3): the server reads them all. It read only the first line of each, so the valid upgrades
// here were answered 400.
// Upgrade and Connection split over several field lines (one list each, RFC 9110 5.3), and
// whether a handshake with them goes through: for the server's request checks and the client's
// 101 checks alike.
struct split_upgrade_case {
    const char* fields;
    bool ok;
};
constexpr split_upgrade_case k_split_upgrade_fields[] = {
    {"Upgrade: websocket\r\nConnection: keep-alive\r\nConnection: Upgrade\r\n", true},
    {"Upgrade: h2c\r\nupgrade: WebSocket\r\nConnection: Upgrade\r\n", true},
    {"Connection: \r\nUpgrade: \r\nconnection: upgrade\r\nUpgrade: websocket\r\n", true},
    {"Upgrade: websocket\r\nConnection: keep-alive\r\nConnection: close\r\n", false},
    {"Upgrade: h2c\r\nUpgrade: websockets\r\nConnection: Upgrade\r\n", false},
};

TEST_P(http_websocket_test, upgrade_and_connection_over_several_request_fields_are_one_list) {
    start_echo();
    const std::string key = "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
    for (const auto& c : k_split_upgrade_fields) {
        auto s = raw_connect();
        std::string rest;
        const std::string head = raw_request(s, c.fields + key, rest);
        EXPECT_EQ(head.rfind(c.ok ? "HTTP/1.1 101 " : "HTTP/1.1 400 ", 0), 0u) << c.fields << head;
        (void)s.close();
    }
}

// A client's handshake with a peer on l that answers its one connection with `answer`, a 101's
// head in which "$" stands for the right Sec-WebSocket-Accept value.
result<websocket> connect_to_answer(net::listener& l, std::string answer, const websocket_options& o) {
    auto at = l.local_address();
    if (!at) return unexpected(at.error());
    auto answerer = spawn([&] {
        auto s = l.accept(5s);
        ASSERT_TRUE(s) << s.error().message();
        std::string req;
        char buf[4096];
        while (req.find("\r\n\r\n") == std::string::npos) {
            auto n = s->read_some(buf, sizeof buf, 5s);
            ASSERT_TRUE(n && *n > 0);
            req.append(buf, *n);
        }
        const std::string name = "Sec-WebSocket-Key: ";
        const size_t k = req.find(name);
        ASSERT_NE(k, std::string::npos) << req;
        const std::string key = req.substr(k + name.size(), req.find("\r\n", k) - k - name.size());
        for (size_t d; (d = answer.find('$')) != std::string::npos;) answer.replace(d, 1, ws::accept_value(key));
        ASSERT_TRUE(s->write_all(answer.data(), answer.size(), 5s));
    });
    if (!answerer) return unexpected(answerer.error());
    auto w = websocket::connect("ws://127.0.0.1:" + std::to_string(at->port()) + "/", o);
    EXPECT_TRUE(answerer->join());
    return w;
}

// Sec-WebSocket-Accept and Sec-WebSocket-Protocol may appear once in the server's answer (RFC
// 6455 11.3.3, 11.3.4): a second one fails the handshake. Only the first was checked, so a
// second with another accept value or another subprotocol went unread. Sec-WebSocket-Extensions
// must name nothing (the client offers no extension) on any of its lines: an empty first line
// let a second that agrees on permessage-deflate through.
TEST_P(http_websocket_test, a_101_with_a_field_twice_fails_the_handshake) {
    auto l = net::listener::listen(net::address::ipv4_loopback(0));
    ASSERT_TRUE(l) << l.error().message();
    struct answer_case {
        std::string fields;  // after Sec-WebSocket-Accept, "$" standing for its right value
        bool ok;
    };
    const std::vector<answer_case> cases = {
        {"", true},
        {"Sec-WebSocket-Protocol: b\r\n", true},
        {"Sec-WebSocket-Accept: $\r\n", false},
        {"Sec-WebSocket-Accept: d3JvbmcgYWNjZXB0IHZhbHVlIQ==\r\n", false},
        {"Sec-WebSocket-Protocol: a\r\nSec-WebSocket-Protocol: b\r\n", false},
        {"Sec-WebSocket-Extensions: \r\n", true},
        {"Sec-WebSocket-Extensions: permessage-deflate\r\n", false},
        {"Sec-WebSocket-Extensions: \r\nSec-WebSocket-Extensions: permessage-deflate\r\n", false},
        {"Sec-WebSocket-Extensions:\r\nsec-websocket-extensions: x-custom\r\n", false},
    };
    for (const auto& c : cases) {
        websocket_options o;
        o.subprotocols = {"a", "b"};
        auto w = connect_to_answer(*l, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                                       "Connection: Upgrade\r\nSec-WebSocket-Accept: $\r\n" + c.fields + "\r\n", o);
        EXPECT_EQ(w.has_value(), c.ok) << c.fields;
        if (!c.ok && !w) {
            EXPECT_EQ(w.error(), std::errc::protocol_error) << c.fields;
        }
    }
}

// A 101 may split its Upgrade and Connection lists over several field lines (RFC 9110 5.3): the
// client reads them all. It read only the first line of each, so the valid answers here failed
// the handshake (EPROTO).
TEST_P(http_websocket_test, upgrade_and_connection_over_several_101_fields_are_one_list) {
    auto l = net::listener::listen(net::address::ipv4_loopback(0));
    ASSERT_TRUE(l) << l.error().message();
    for (const auto& c : k_split_upgrade_fields) {
        auto w = connect_to_answer(*l, std::string("HTTP/1.1 101 Switching Protocols\r\n") + c.fields + "Sec-WebSocket-Accept: $\r\n\r\n", {});
        EXPECT_EQ(w.has_value(), c.ok) << c.fields;
        if (!c.ok && !w) {
            EXPECT_EQ(w.error(), std::errc::protocol_error) << c.fields;
        }
    }
}

TEST_P(http_websocket_test, recv_timeout_keeps_the_connection) {
    start_echo();
    auto c = websocket::connect(url("/echo"));
    ASSERT_TRUE(c);
    auto m = c->recv(20ms);
    ASSERT_FALSE(m);
    EXPECT_EQ(m.error(), std::errc::timed_out);
    ASSERT_TRUE(c->send_text("still here", 5s));
    m = c->recv(5s);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->data, "still here");
}

TEST_P(http_websocket_test, over_a_stream_whose_handshake_was_made_elsewhere) {
    auto pair = net::stream::pair();
    ASSERT_TRUE(pair);
    // The first frame is already "read" past the handshake: a masked "hi" from the client.
    auto srv = websocket::over(pair->first, true, masked_frame(0x81, "hi"));
    auto cli = websocket::over(pair->second, false);
    ASSERT_TRUE(srv && cli);
    auto m = srv->recv(5s);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->data, "hi");
    ASSERT_TRUE(cli->send_binary("from client", 5s));
    m = srv->recv(5s);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->data, "from client");
    ASSERT_TRUE(srv->send_text("from server", 5s));
    m = cli->recv(5s);
    ASSERT_TRUE(m);
    EXPECT_EQ(m->data, "from server");
}

// A client waits for the server to end TCP after the close frames (RFC 6455 7.1.1), but within
// close()'s timeout: a server that keeps the connection does not stretch the call to
// close_timeout.
TEST_P(http_websocket_test, close_returns_within_its_timeout_when_the_server_keeps_the_connection) {
    auto pair = net::stream::pair();
    ASSERT_TRUE(pair);
    websocket_options o;
    o.close_timeout = 20s;
    auto cli = websocket::over(pair->second, false, {}, o);
    ASSERT_TRUE(cli);
    ASSERT_TRUE(pair->first.write_all("\x88\x02\x03\xe8", 4, 5s));  // the server's close frame, 1000
    const auto start = std::chrono::steady_clock::now();
    auto r = cli->close(close_code::normal, {}, 200ms);
    const auto took = std::chrono::steady_clock::now() - start;
    ASSERT_TRUE(r) << r.error().message();
    EXPECT_EQ(cli->close_status(), close_code::normal);
    EXPECT_LT(took, 10s);  // 200 ms and a little; 20 s when close_timeout was waited out
}

// close() succeeds only once the closing handshake completed. A peer that ends TCP without a
// close frame (close_status() 1006) fails it with ECONNRESET, then and on a later call; it
// returned success, as if the peer had answered.
TEST_P(http_websocket_test, close_fails_when_the_peer_ends_tcp_without_a_close_frame) {
    auto pair = net::stream::pair();
    ASSERT_TRUE(pair);
    auto cli = websocket::over(pair->second, false);
    ASSERT_TRUE(cli);
    ASSERT_TRUE(pair->first.shutdown(5s));  // the server's FIN, no close frame
    auto r = cli->close(close_code::normal, {}, 5s);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::connection_reset);
    EXPECT_EQ(cli->close_status(), close_code::abnormal);
    r = cli->close(close_code::normal, {}, 5s);  // the connection is gone: still no handshake
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::connection_reset);
    char echo[2];  // our close frame went out before the end was seen
    ASSERT_TRUE(pair->first.read_exactly(echo, sizeof echo, 5s));
    EXPECT_EQ(static_cast<uint8_t>(echo[0]), 0x88);
}

// A close() called after recv() completed the handshake (the peer closed first) succeeds.
TEST_P(http_websocket_test, close_after_the_peers_close_succeeds) {
    auto pair = net::stream::pair();
    ASSERT_TRUE(pair);
    auto cli = websocket::over(pair->second, false);
    ASSERT_TRUE(cli);
    ASSERT_TRUE(pair->first.write_all("\x88\x02\x03\xe8", 4, 5s));  // the server's close frame, 1000
    ASSERT_TRUE(pair->first.shutdown(5s));  // then its end of TCP
    auto m = cli->recv(5s);
    ASSERT_FALSE(m);
    EXPECT_EQ(m.error(), std::errc::no_message_available);
    auto r = cli->close(close_code::normal, {}, 5s);
    EXPECT_TRUE(r) << r.error().message();
    EXPECT_EQ(cli->close_status(), close_code::normal);
}

// A message close() reads and discards that breaks the protocol fails the connection as in
// recv(), and close() returns recv()'s error for it (its Errors list did not say so).
TEST_P(http_websocket_test, close_reports_a_protocol_error_in_what_it_discards) {
    auto pair = net::stream::pair();
    ASSERT_TRUE(pair);
    auto srv = websocket::over(pair->first, true);
    ASSERT_TRUE(srv);
    ASSERT_TRUE(pair->second.write_all("\x81\x02hi", 4, 5s));  // unmasked: a protocol error
    ASSERT_TRUE(pair->second.shutdown(5s));  // (failing reads what follows: nothing)
    auto r = srv->close(close_code::normal, {}, 5s);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::protocol_error);
    EXPECT_EQ(srv->close_status(), close_code::abnormal);
    EXPECT_FALSE(srv->is_open());
}

// close() while another fiber is parked in recv(): that recv() takes the peer's close frame and
// returns ENODATA, and close() returns after it. Both read into the one buffer before: the
// close frame went to either call, and the other's read met the end of the connection
// (close_status() 1006) or stayed parked past close().
TEST_P(http_websocket_test, close_beside_a_parked_recv_leaves_the_reading_to_it) {
    auto pair = net::stream::pair();
    ASSERT_TRUE(pair);
    auto srv = websocket::over(pair->first, true);
    auto cli = websocket::over(pair->second, false);
    ASSERT_TRUE(srv && cli);
    std::optional<std::error_code> read_error;
    auto reader = spawn([&] {
        auto m = cli->recv();
        read_error = m ? std::error_code() : m.error();
    });
    ASSERT_TRUE(reader);
    this_fiber::yield();  // the reader parks in recv()
    auto peer = spawn([&] { EXPECT_FALSE(srv->recv(5s)); });  // answers the close, ends TCP
    ASSERT_TRUE(peer);
    auto r = cli->close(close_code::normal, {}, 5s);
    EXPECT_TRUE(r) << r.error().message();
    EXPECT_EQ(cli->close_status(), close_code::normal);
    EXPECT_TRUE(read_error && *read_error == std::errc::no_message_available);  // returned first
    ASSERT_TRUE(peer->join());
    (void)pair->first.close();  // (a reader still parked, if this failed, ends)
    ASSERT_TRUE(reader->join());
}

// A peer that does not answer: close() fails at its timeout and ends the connection under the
// parked recv(), which returns rather than wait on.
TEST_P(http_websocket_test, close_beside_a_parked_recv_ends_it_at_its_timeout) {
    auto pair = net::stream::pair();
    ASSERT_TRUE(pair);
    auto cli = websocket::over(pair->second, false);
    ASSERT_TRUE(cli);
    event read_done;
    std::error_code read_error;
    auto reader = spawn([&] {
        auto m = cli->recv();
        read_error = m ? std::error_code() : m.error();
        read_done.set();
    });
    ASSERT_TRUE(reader);
    this_fiber::yield();
    auto r = cli->close(close_code::normal, {}, 200ms);
    EXPECT_FALSE(r);
    if (!r) {
        EXPECT_EQ(r.error(), std::errc::timed_out);
    }
    EXPECT_TRUE(read_done.wait(5s));
    EXPECT_EQ(read_error, std::errc::no_message_available);
    EXPECT_EQ(cli->close_status(), close_code::abnormal);
    (void)pair->first.close();  // (a reader still parked, if this failed, ends)
    ASSERT_TRUE(reader->join());
}

TEST_P(http_websocket_test, refused_upgrades) {
    start_echo();
    auto s = raw_connect();
    std::string buf;
    auto r = raw_handshake(s, "Sec-WebSocket-Version: 8\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", buf);
    EXPECT_NE(r.find("426"), std::string::npos) << r;
    EXPECT_NE(r.find("Sec-WebSocket-Version: 13"), std::string::npos) << r;
    auto s2 = raw_connect();
    r = raw_handshake(s2, "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: short\r\n", buf);
    EXPECT_NE(r.find("400"), std::string::npos) << r;
    EXPECT_EQ(websocket::connect("http://127.0.0.1:1/").error(), std::errc::invalid_argument);
}

TEST_P(http_websocket_test, coalesced_answers_to_a_burst_all_arrive) {
    websocket_options o;
    o.coalesce_sends = true;
    start_echo(o);
    auto s = raw_upgrade();
    std::string burst = masked_frame(0x81, "one") + masked_frame(0x89, "p") + masked_frame(0x82, "two") +
                        masked_frame(0x81, std::string(5000, 'x')) + masked_frame(0x81, "three");
    ASSERT_TRUE(s.write_all(burst.data(), burst.size(), 5s));
    std::string in;
    std::vector<std::string> got;
    while (got.size() < 5) {
        auto f = read_frame(s, in);
        ASSERT_TRUE(f.has_value()) << got.size();
        got.push_back(std::to_string(f->opcode) + ":" + (f->payload.size() > 10 ? "big" : f->payload));
    }
    EXPECT_EQ(got, (std::vector<std::string>{"1:one", "10:p", "2:two", "1:big", "1:three"}));
}

// ---- hostile clients --------------------------------------------------------------------------

TEST_P(http_websocket_test, unmasked_client_frame_is_a_protocol_error) {
    start_echo();
    auto s = raw_upgrade();
    ASSERT_TRUE(s.write_all("\x81\x02hi", 4, 5s));
    EXPECT_EQ(read_close_code(s), 1002);
    EXPECT_EQ(server_result().err, EPROTO);
}

TEST_P(http_websocket_test, reserved_bits_and_opcodes_are_protocol_errors) {
    start_echo();
    for (std::string first : {"\xc1", "\x83", "\x0b", "\x09", "\x80"}) {  // RSV1, opcodes 3, 11, bad ping, stray continuation
        auto s = raw_upgrade();
        std::string f = masked_frame(static_cast<uint8_t>(first[0]), "x");
        ASSERT_TRUE(s.write_all(f.data(), f.size(), 5s));
        EXPECT_EQ(read_close_code(s), 1002) << int(static_cast<uint8_t>(first[0]));
        EXPECT_EQ(server_result().err, EPROTO);
    }
}

TEST_P(http_websocket_test, oversize_message_is_1009) {
    websocket_options o;
    o.max_message_bytes = 1000;
    start_echo(o);
    auto s = raw_upgrade();
    std::string f = masked_frame(0x01, "a") + masked_frame(0x00, std::string(600, 'b')) +
                    masked_frame(0x80, std::string(600, 'c'));  // 1201 bytes over three fragments
    ASSERT_TRUE(s.write_all(f.data(), f.size(), 5s));
    EXPECT_EQ(read_close_code(s), 1009);
    EXPECT_EQ(server_result().err, EMSGSIZE);
}

TEST_P(http_websocket_test, invalid_utf8_is_1007_even_across_fragments) {
    start_echo();
    auto s = raw_upgrade();
    std::string f = masked_frame(0x01, "ok \xe2\x82") + masked_frame(0x80, "(");
    ASSERT_TRUE(s.write_all(f.data(), f.size(), 5s));
    EXPECT_EQ(read_close_code(s), 1007);
    EXPECT_EQ(server_result().err, EILSEQ);
    auto s2 = raw_upgrade();  // a close reason that is not UTF-8
    f = masked_frame(0x88, std::string("\x03\xe8\xff", 3));
    ASSERT_TRUE(s2.write_all(f.data(), f.size(), 5s));
    EXPECT_EQ(read_close_code(s2), 1007);
}

// Failing the connection stays within recv()'s timeout: the close frame still goes out, and
// the moment of reading what the peer still sends is cut short. It lingered a second whatever
// the timeout, so a recv(50ms) that met a broken frame of a peer that kept the connection
// returned after a second.
TEST_P(http_websocket_test, failing_the_connection_stays_within_recvs_timeout) {
    auto pair = net::stream::pair();
    ASSERT_TRUE(pair);
    auto srv = websocket::over(pair->first, true);
    ASSERT_TRUE(srv);
    ASSERT_TRUE(pair->second.write_all("\x81\x02hi", 4, 5s));  // unmasked: a protocol error
    const auto start = std::chrono::steady_clock::now();
    auto r = srv->recv(50ms);
    const auto took = std::chrono::steady_clock::now() - start;
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::protocol_error);
    EXPECT_LT(took, 700ms);  // 50 ms and a little; a second when it lingered regardless
    std::string in;
    auto f = read_frame(pair->second, in);
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->opcode, 8);
    ASSERT_EQ(f->payload.size(), 2u);
    EXPECT_EQ((static_cast<uint8_t>(f->payload[0]) << 8) | static_cast<uint8_t>(f->payload[1]), 1002);
}

TEST_P(http_websocket_test, close_without_status_is_1005) {
    start_echo();
    auto s = raw_upgrade();
    std::string f = masked_frame(0x88, "");
    ASSERT_TRUE(s.write_all(f.data(), f.size(), 5s));
    EXPECT_EQ(read_close_code(s), 0);  // answered with an empty close frame
    auto end = server_result();
    EXPECT_EQ(end.err, ENODATA);
    EXPECT_EQ(end.code, close_code::no_status);
    auto s2 = raw_upgrade();  // a close code that may not be sent
    f = masked_frame(0x88, std::string("\x03\xed", 2));  // 1005
    ASSERT_TRUE(s2.write_all(f.data(), f.size(), 5s));
    EXPECT_EQ(read_close_code(s2), 1002);
}

TEST_P(http_websocket_test, flood_of_empty_fragments_is_bounded) {
    start_echo();
    auto s = raw_upgrade();
    std::string f = masked_frame(0x01, "");
    std::string empty = masked_frame(0x00, "");
    for (int i = 0; i < 5000; ++i) f += empty;
    ASSERT_TRUE(s.write_all(f.data(), f.size(), 5s));
    EXPECT_EQ(read_close_code(s), 1008);
    EXPECT_EQ(server_result().err, EPROTO);
}

// A control frame whose payload is not all in when its head is decoded is decoded again once
// it is: it is still one frame of the message it interrupts.
TEST_P(http_websocket_test, a_ping_read_in_pieces_counts_once_against_max_frames_per_message) {
    auto pair = net::stream::pair();
    ASSERT_TRUE(pair);
    websocket_options o;
    o.max_frames_per_message = 3;  // the first fragment, a ping, the last fragment
    const std::string ping = masked_frame(0x89, "ping");
    // The ping's head (6 bytes) and one byte of its payload are in when recv() starts.
    auto srv = websocket::over(pair->first, true, masked_frame(0x01, "a") + ping.substr(0, 7), o);
    ASSERT_TRUE(srv);
    const std::string rest = ping.substr(7) + masked_frame(0x80, "b");
    ASSERT_TRUE(pair->second.write_all(rest.data(), rest.size(), 5s));
    auto m = srv->recv(5s);
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_EQ(m->data, "ab");
    std::string in;
    auto pong = read_frame(pair->second, in);
    ASSERT_TRUE(pong.has_value());
    EXPECT_EQ(pong->opcode, 0xa);
    EXPECT_EQ(pong->payload, "ping");
}

// A pong waits for the send lock as long as recv() may wait, not for send_timeout: sends that
// held the lock longer between them made recv(forever) fail with ETIMEDOUT and the ping go
// unanswered, and a recv() with a shorter timeout waited send_timeout. A recv() whose timeout
// ends first keeps the pong for the next one.
TEST_P(http_websocket_test, a_pong_behind_a_send_waits_within_recvs_timeout_and_leaves_later) {
    auto pair = net::stream::pair();
    ASSERT_TRUE(pair);
    websocket_options o;
    o.send_timeout = 5s;
    auto srv = websocket::over(pair->first, true, {}, o);
    ASSERT_TRUE(srv);
    const std::string big(8 << 20, 'b');  // more than the pair buffers: sent as the peer reads
    auto sender = spawn([&] { EXPECT_TRUE(srv->send_binary(big)); });
    ASSERT_TRUE(sender);
    this_fiber::yield();  // the sender holds the send lock, waiting for the peer to read
    const std::string ping = masked_frame(0x89, "are you there");
    ASSERT_TRUE(pair->second.write_all(ping.data(), ping.size(), 5s));
    const auto start = std::chrono::steady_clock::now();
    auto r = srv->recv(100ms);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);  // 100 ms, not send_timeout
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::timed_out);
    std::string in;
    auto data = read_frame(pair->second, in);  // the peer reads: the send ends
    ASSERT_TRUE(data);
    EXPECT_EQ(data->payload.size(), big.size());
    ASSERT_TRUE(sender->join());
    r = srv->recv(100ms);  // sends the pong, then finds no message
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::timed_out);
    auto pong = read_frame(pair->second, in);
    ASSERT_TRUE(pong);
    EXPECT_EQ(pong->opcode, 0xa);
    EXPECT_EQ(pong->payload, "are you there");
}

// Full duplex: a recv() beside a send that waits for the peer to read takes the message that
// came meanwhile. It waited for the send lock whenever the output buffer held bytes, which a
// send under way (a client's masked payload) also leaves there: it waited for the send to end,
// and two peers each reading only after their own send deadlocked until send_timeout.
TEST_P(http_websocket_test, recv_beside_a_send_waiting_for_the_peer_takes_what_came) {
    auto pair = net::stream::pair();
    ASSERT_TRUE(pair);
    auto srv = websocket::over(pair->first, true);
    auto cli = websocket::over(pair->second, false);
    ASSERT_TRUE(srv && cli);
    const std::string big(8 << 20, 'b');  // more than the pair buffers: sent as the server reads
    auto sender = spawn([&] { EXPECT_TRUE(cli->send_binary(big, 30s)); });
    ASSERT_TRUE(sender);
    this_fiber::yield();  // the sender holds the send lock, waiting for the server to read
    ASSERT_TRUE(srv->send_text("meanwhile", 5s));
    auto m = cli->recv(5s);
    EXPECT_TRUE(m) << m.error().message();
    if (m) {
        EXPECT_EQ(m->data, "meanwhile");
    }
    m = srv->recv(30s);  // the server reads: the send ends
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_EQ(m->data.size(), big.size());
    ASSERT_TRUE(sender->join());
}

// A peer that sends its close frame and reads nothing more: the echo waits for the send lock
// (held by a send the peer does not take) only as long as recv() may wait, then the connection
// is shut down under that send. recv() waited send_timeout for the lock.
TEST_P(http_websocket_test, a_close_echo_behind_a_stuck_send_waits_within_recvs_timeout) {
    auto pair = net::stream::pair();
    ASSERT_TRUE(pair);
    websocket_options o;
    o.send_timeout = 5s;
    auto srv = websocket::over(pair->first, true, {}, o);
    ASSERT_TRUE(srv);
    const std::string big(8 << 20, 'b');  // more than the pair buffers: the peer never reads it
    auto sender = spawn([&] { (void)srv->send_binary(big); });
    ASSERT_TRUE(sender);
    this_fiber::yield();  // the sender holds the send lock, waiting for the peer to read
    const std::string close = masked_frame(0x88, std::string("\x03\xe8", 2));  // 1000
    ASSERT_TRUE(pair->second.write_all(close.data(), close.size(), 5s));
    const auto start = std::chrono::steady_clock::now();
    auto r = srv->recv(100ms);
    EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);  // 100 ms, not send_timeout
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::no_message_available);
    EXPECT_EQ(srv->close_status(), close_code::normal);
    EXPECT_FALSE(srv->is_open());
    ASSERT_TRUE(sender->join());  // its write ended with the connection
}

// close() waits for the send lock behind a send the peer has not read yet, and a recv() beside
// it takes the peer's close frame, or a ping and then the close frame, meanwhile: its echo or
// pong waits behind close()'s frame and is not sent after it. The echo went out as a second
// close frame, and the pong failed with EPIPE, which failed the connection (recv() returned
// EPIPE, close_status() 1006) in the middle of a clean closing handshake.
TEST_P(http_websocket_test, an_echo_or_pong_behind_closes_frame_is_not_sent_after_it) {
    const std::string close = masked_frame(0x88, std::string("\x03\xe8", 2));  // 1000
    for (const std::string& from_peer : {close, masked_frame(0x89, "ping") + close}) {
        auto pair = net::stream::pair();
        ASSERT_TRUE(pair);
        auto srv = websocket::over(pair->first, true);
        ASSERT_TRUE(srv);
        const std::string big(8 << 20, 'b');  // more than the pair buffers: sent as the peer reads
        auto sender = spawn([&] { EXPECT_TRUE(srv->send_binary(big, 30s)); });
        ASSERT_TRUE(sender);
        this_fiber::yield();  // the sender holds the send lock
        std::optional<std::error_code> read_error;
        auto reader = spawn([&] {
            auto m = srv->recv(30s);
            read_error = m ? std::error_code() : m.error();
        });
        ASSERT_TRUE(reader);
        this_fiber::yield();  // the reader parks in recv()
        auto closer = spawn([&] { EXPECT_TRUE(srv->close(close_code::normal, {}, 30s)); });
        ASSERT_TRUE(closer);
        this_fiber::yield();  // close() waits for the send lock
        ASSERT_TRUE(pair->second.write_all(from_peer.data(), from_peer.size(), 5s));
        // The reader takes what came (and waits for the send lock) while the peer reads the
        // message: the send ends only once all of it has been read.
        std::string in;
        std::vector<int> ops;
        for (;;) {
            auto f = read_frame(pair->second, in);  // up to the server's end of TCP
            if (!f) break;
            ops.push_back(f->opcode);
        }
        EXPECT_EQ(ops, (std::vector<int>{2, 8})) << from_peer.size();  // the message, one close
        ASSERT_TRUE(sender->join());
        ASSERT_TRUE(closer->join());
        ASSERT_TRUE(reader->join());
        EXPECT_TRUE(read_error && *read_error == std::errc::no_message_available) << from_peer.size();
        EXPECT_EQ(srv->close_status(), close_code::normal);
    }
}

// A send whose write fails (here its timeout, with the peer not reading) fails the connection
// and ends it under a recv() parked in another fiber. The connection was only marked failed:
// the recv() waited on for a peer that had nothing more to send, and held its fiber (a
// server's handler) for as long as the peer kept the connection.
TEST_P(http_websocket_test, a_failed_send_ends_a_parked_recv) {
    auto pair = net::stream::pair();
    ASSERT_TRUE(pair);
    auto srv = websocket::over(pair->first, true);
    ASSERT_TRUE(srv);
    event read_done;
    std::error_code read_error;
    auto reader = spawn([&] {
        auto m = srv->recv();
        read_error = m ? std::error_code() : m.error();
        read_done.set();
    });
    ASSERT_TRUE(reader);
    this_fiber::yield();  // the reader parks in recv()
    const std::string big(8 << 20, 'b');  // more than the pair buffers: the peer never reads it
    auto r = srv->send_binary(big, 200ms);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::timed_out);
    EXPECT_FALSE(srv->is_open());
    EXPECT_TRUE(read_done.wait(5s));
    EXPECT_EQ(read_error, std::errc::no_message_available);
    EXPECT_EQ(srv->close_status(), close_code::abnormal);
    (void)pair->second.close();  // (a reader still parked, if this failed, ends)
    ASSERT_TRUE(reader->join());
}

// A send behind another fiber's send waits for it and writes within one timeout: the wait for
// the send lock and the write had one each, so a send that got the lock late and then found
// the peer not reading took up to twice its timeout.
TEST_P(http_websocket_test, a_send_behind_a_stuck_send_returns_within_its_timeout) {
    auto pair = net::stream::pair();
    ASSERT_TRUE(pair);
    auto srv = websocket::over(pair->first, true);
    ASSERT_TRUE(srv);
    const std::string big(8 << 20, 'b');  // more than the pair buffers: sent as the peer reads
    auto first = spawn([&] { EXPECT_TRUE(srv->send_binary(big, 30s)); });
    ASSERT_TRUE(first);
    this_fiber::yield();  // the first send holds the send lock, waiting for the peer to read
    std::error_code second_error;
    std::chrono::steady_clock::duration took{};
    auto second = spawn([&] {
        const auto start = std::chrono::steady_clock::now();
        auto r = srv->send_binary(big, 1s);
        took = std::chrono::steady_clock::now() - start;
        second_error = r ? std::error_code() : r.error();
    });
    ASSERT_TRUE(second);
    this_fiber::yield();  // the second waits for the send lock
    // The first send stays stuck for most of the second's timeout (the case under test, not a
    // wait for an event), then the peer takes its message and reads no more: the second gets
    // the lock with 300 ms left, and its write stalls.
    ASSERT_TRUE(this_fiber::sleep_for(700ms));
    std::string in;
    auto f = read_frame(pair->second, in);
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->payload.size(), big.size());
    ASSERT_TRUE(first->join());
    ASSERT_TRUE(second->join());
    EXPECT_EQ(second_error, std::errc::timed_out);
    EXPECT_LT(took, 1500ms);  // 1 s and a little; 1.7 s when the write had a second of its own
}

// A stream given to over() stays its owner's: after the closing handshake a client leaves it
// open for its owner to close, as it does when the connection fails. It closed it, under its
// owner.
TEST_P(http_websocket_test, a_client_over_a_stream_of_its_owner_leaves_it_open_after_the_handshake) {
    auto pair = net::stream::pair();
    ASSERT_TRUE(pair);
    auto cli = websocket::over(pair->second, false);
    ASSERT_TRUE(cli);
    ASSERT_TRUE(pair->first.write_all("\x88\x02\x03\xe8", 4, 5s));  // the server's close frame, 1000
    ASSERT_TRUE(pair->first.shutdown(5s));  // then its end of TCP, as the RFC has it
    auto r = cli->recv(5s);  // answers the close, waits for the end
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), std::errc::no_message_available);
    EXPECT_EQ(cli->close_status(), close_code::normal);
    char buf[16];
    auto n = pair->second.read_some(buf, sizeof buf, 5s);  // EBADF once closed
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_EQ(*n, 0u);
    char echo[2];  // the client's answer reached the server: a close frame, masked
    ASSERT_TRUE(pair->first.read_exactly(echo, sizeof echo, 5s));
    EXPECT_EQ(static_cast<uint8_t>(echo[0]), 0x88);
    EXPECT_EQ(static_cast<uint8_t>(echo[1]), 0x82);
}

TEST_P(http_websocket_test, ping_flood_gets_pongs_and_service_continues) {
    start_echo();
    auto s = raw_upgrade();
    std::string f;
    for (int i = 0; i < 2000; ++i) f += masked_frame(0x89, "p");
    f += masked_frame(0x81, "after");
    ASSERT_TRUE(s.write_all(f.data(), f.size(), 5s));
    int pongs = 0;
    std::string in;
    for (;;) {
        auto fr = read_frame(s, in);
        ASSERT_TRUE(fr.has_value());
        if (fr->opcode == 0xa) {
            ++pongs;
            continue;
        }
        EXPECT_EQ(fr->opcode, 0x1);
        EXPECT_EQ(fr->payload, "after");
        break;
    }
    EXPECT_EQ(pongs, 2000);
}

}  // namespace
}  // namespace gluon::http
