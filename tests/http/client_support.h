// A test's own HTTP client: writes the bytes it is given and reads one response of any framing.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "gluon/http/parser.h"
#include "gluon/net/socket.h"

namespace gluon::http {

using namespace std::chrono_literals;

struct test_reply {
    int status = 0;
    std::string head;  // status line and fields
    std::string body;
    bool keep_alive = true;
};

/// Reads one response (any framing) from s, using `buf` for bytes that arrived after it.
inline std::optional<test_reply> read_reply(net::stream& s, std::string& buf, method verb = method::get) {
    std::vector<header> f(100);
    response_head h;
    h.headers = f.data();
    size_t scanned = 0;
    char tmp[65536];
    for (;;) {
        auto r = parse_response(buf, h, {}, scanned, verb);
        if (r.state == parse_result::invalid) return std::nullopt;
        if (r.state == parse_result::complete) {
            test_reply out;
            out.status = h.status;
            out.head = buf.substr(0, r.consumed);
            out.keep_alive = h.keep_alive;
            buf.erase(0, r.consumed);
            if (h.body == framing::length) {
                while (buf.size() < h.content_length) {
                    auto n = s.read_some(tmp, sizeof tmp, 5s);
                    if (!n || *n == 0) return std::nullopt;
                    buf.append(tmp, *n);
                }
                out.body = buf.substr(0, h.content_length);
                buf.erase(0, h.content_length);
            } else if (h.body == framing::chunked) {
                chunked_decoder d;
                for (;;) {
                    auto st = d.next(buf);
                    if (st.error) return std::nullopt;
                    out.body += st.data;
                    buf.erase(0, st.consumed);
                    if (st.done) break;
                    if (st.consumed == 0) {
                        auto n = s.read_some(tmp, sizeof tmp, 5s);
                        if (!n || *n == 0) return std::nullopt;
                        buf.append(tmp, *n);
                    }
                }
            } else if (h.body == framing::to_close) {
                for (;;) {
                    auto n = s.read_some(tmp, sizeof tmp, 5s);
                    if (!n || *n == 0) break;
                    buf.append(tmp, *n);
                }
                out.body = std::move(buf);
                buf.clear();
            }
            if (h.status == 100) return read_reply(s, buf, verb);
            return out;
        }
        auto n = s.read_some(tmp, sizeof tmp, 5s);
        if (!n || *n == 0) return std::nullopt;
        buf.append(tmp, *n);
    }
}

/// True once the server has closed the connection (EOF or reset), with nothing more sent.
inline bool closed_by_server(net::stream& s) {
    char c;
    auto n = s.read_some(&c, 1, 5s);
    return (n && *n == 0) || (!n && n.error() == std::errc::connection_reset);
}


inline std::optional<test_reply> roundtrip(net::stream& c, const std::string& req, method verb = method::get) {
    if (!c.write_all(req.data(), req.size(), 5s)) return std::nullopt;
    std::string buf;
    return read_reply(c, buf, verb);
}

/// Writes all of text (its length counted here, never by hand).
inline bool send_text(net::stream& c, std::string_view text) {
    return static_cast<bool>(c.write_all(text.data(), text.size(), 5s));
}

/// The value of a field in a response head ("" if absent).
inline std::string field(const std::string& head, const std::string& name) {
    size_t p = head.find("\r\n" + name + ": ");
    if (p == std::string::npos) return "";
    p += name.size() + 4;
    return head.substr(p, head.find("\r\n", p) - p);
}

}  // namespace gluon::http
