// Test helpers for WebSocket: a gluon echo server on the test's vCPU that reports how each
// connection ended, and a raw client that writes frames byte by byte.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "gluon/http/message.h"
#include "gluon/http/server.h"
#include "gluon/http/websocket.h"
#include "gluon/net/socket.h"
#include "gluon/sync/channel.h"
#include "test_support.h"

namespace gluon::http::ws_testing {

using namespace std::chrono_literals;

struct outcome {
    int err = -1;  // 0: the handler's close() succeeded; else recv's errno
    uint16_t code = 0;
    std::string reason;
};

struct raw_frame {
    uint8_t opcode = 0;
    bool fin = false;
    std::string payload;
};

/// A client frame (masked), `b0` its first byte (FIN, RSV, opcode).
inline std::string masked_frame(uint8_t b0, const std::string& payload) {
    std::string f(1, static_cast<char>(b0));
    const size_t n = payload.size();
    if (n < 126) {
        f += static_cast<char>(0x80 | n);
    } else {
        f += static_cast<char>(0x80 | 126);
        f += static_cast<char>(n >> 8);
        f += static_cast<char>(n & 0xff);
    }
    const char key[4] = {0x12, 0x34, 0x56, 0x78};
    f.append(key, 4);
    for (size_t i = 0; i < n; ++i) f += static_cast<char>(payload[i] ^ key[i & 3]);
    return f;
}

/// Reads one server frame (unmasked); `in` keeps bytes read past it.
inline std::optional<raw_frame> read_frame(net::stream& s, std::string& in) {
    auto need = [&](size_t n) {
        char buf[4096];
        while (in.size() < n) {
            auto r = s.read_some(buf, sizeof buf, 5s);
            if (!r || *r == 0) return false;
            in.append(buf, *r);
        }
        return true;
    };
    if (!need(2)) return std::nullopt;
    raw_frame f;
    auto b0 = static_cast<uint8_t>(in[0]), b1 = static_cast<uint8_t>(in[1]);
    f.fin = b0 & 0x80;
    f.opcode = b0 & 0x0f;
    if (b1 & 0x80) return std::nullopt;  // a server never masks
    uint64_t len = b1 & 0x7f;
    size_t at = 2;
    if (len == 126) {
        if (!need(4)) return std::nullopt;
        len = (uint64_t{static_cast<uint8_t>(in[2])} << 8) | static_cast<uint8_t>(in[3]);
        at = 4;
    } else if (len == 127) {
        if (!need(10)) return std::nullopt;
        len = 0;
        for (int i = 0; i < 8; ++i) len = (len << 8) | static_cast<uint8_t>(in[2 + i]);
        at = 10;
    }
    if (!need(at + len)) return std::nullopt;
    f.payload = in.substr(at, len);
    in.erase(0, at + len);
    return f;
}

/// Reads frames up to a close frame and then the end of the stream; returns the close code
/// (0 for an empty close frame), -1 if no close frame came, -2 if the server did not then
/// end the connection. Closes s.
inline int read_close_code(net::stream& s) {
    std::string in;
    int code = -1;
    for (;;) {
        auto f = read_frame(s, in);
        if (!f) break;
        if (f->opcode != 8) continue;
        code = f->payload.size() >= 2
                   ? (static_cast<uint8_t>(f->payload[0]) << 8) | static_cast<uint8_t>(f->payload[1])
                   : 0;
        char buf[256];
        auto r = s.read_some(buf, sizeof buf, 5s);
        if (!r || *r != 0) code = -2;
        break;
    }
    (void)s.close();
    return code;
}

class ws_fixture : public test::engine_test {
protected:
    void TearDown() override {
        srv_.reset();
        test::engine_test::TearDown();
    }

    /// An echo server on "/echo": text stays text; "close-me" makes it close with 4000 "bye".
    void start_echo(websocket_options o = {}) {
        opts_ = std::move(o);
        auto s = server::start(net::address::ipv4_loopback(0), [this](request& req, response& res) {
            auto w = websocket::accept(req, res, opts_);
            if (!w) return;
            websocket::message m;
            for (;;) {
                auto r = w->recv(m);
                if (!r) {
                    (void)results_.try_send({r.error().value(), w->close_status(), std::string(w->close_reason())});
                    return;
                }
                if (m.data == "close-me") {
                    auto c = w->close(4000, "bye", 5s);
                    (void)results_.try_send({c ? 0 : c.error().value(), w->close_status(), {}});
                    return;
                }
                auto e = m.is_text() ? w->send_text(m.data, 5s) : w->send_binary(m.data, 5s);
                if (!e) return;
            }
        });
        ASSERT_TRUE(s) << s.error().message();
        srv_ = std::move(*s);
    }
    std::string url(const std::string& path) const {
        return "ws://127.0.0.1:" + std::to_string(srv_->local_address().port()) + path;
    }
    /// How the next server connection ended.
    outcome server_result() {
        auto r = results_.recv(5s);
        EXPECT_TRUE(r) << "no result from the server";
        return r ? *r : outcome{};
    }

    net::stream raw_connect() {
        auto c = net::stream::connect(srv_->local_address(), 5s);
        EXPECT_TRUE(c) << c.error().message();
        return std::move(*c);
    }
    /// Sends an upgrade request with the given version and key lines; returns the answer's head.
    std::string raw_handshake(net::stream& s, const std::string& lines, std::string& rest) {
        return raw_request(s, "Upgrade: websocket\r\nConnection: Upgrade\r\n" + lines, rest);
    }
    /// Sends a GET /echo with the given field lines (Host aside); returns the answer's head.
    std::string raw_request(net::stream& s, const std::string& lines, std::string& rest) {
        std::string req = "GET /echo HTTP/1.1\r\nHost: x\r\n" + lines + "\r\n";
        EXPECT_TRUE(s.write_all(req.data(), req.size(), 5s));
        rest.clear();
        char buf[4096];
        while (rest.find("\r\n\r\n") == std::string::npos) {
            auto n = s.read_some(buf, sizeof buf, 5s);
            if (!n || *n == 0) break;
            rest.append(buf, *n);
        }
        size_t end = rest.find("\r\n\r\n");
        std::string head = rest.substr(0, end == std::string::npos ? rest.size() : end + 4);
        rest.erase(0, head.size());
        return head;
    }
    /// A raw connection past a successful handshake.
    net::stream raw_upgrade() {
        auto s = raw_connect();
        std::string rest;
        std::string head = raw_handshake(s, "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n", rest);
        EXPECT_EQ(head.rfind("HTTP/1.1 101 ", 0), 0u) << head;
        EXPECT_NE(head.find("s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), std::string::npos) << head;
        EXPECT_TRUE(rest.empty());
        return s;
    }

    std::unique_ptr<server> srv_;
    websocket_options opts_;
    channel<outcome> results_{64};
};

}  // namespace gluon::http::ws_testing
