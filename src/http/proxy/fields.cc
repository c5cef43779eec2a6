#include "fields.h"

#include <charconv>

#include "gluon/net/byte_stream.h"
#include "gluon/net/socket.h"
#include "gluon/net/tls.h"

namespace gluon::http::detail {

namespace {

bool starts_with_i(std::string_view s, std::string_view prefix) noexcept {
    return s.size() >= prefix.size() && iequals(s.substr(0, prefix.size()), prefix);
}

std::string_view trim(std::string_view s) noexcept {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

bool fixed_hop_field(std::string_view n) noexcept {
    switch (n.size()) {
    case 2: return iequals(n, "te");
    case 7: return iequals(n, "trailer") || iequals(n, "upgrade");
    case 10: return iequals(n, "connection") || iequals(n, "keep-alive");
    case 17: return iequals(n, "transfer-encoding");
    default: return starts_with_i(n, "proxy-");
    }
}

/// The client's address without its port ("192.0.2.1", "2001:db8::1"), or "unknown".
void append_client_ip(std::string& out, net::byte_stream& s) {
    net::socket_fd* sock = s.socket();
    auto peer = sock ? sock->peer_address() : result<net::address>(errno_error(ENOTSOCK));
    if (!peer || (peer->family() != AF_INET && peer->family() != AF_INET6)) {
        out += "unknown";
        return;
    }
    std::string a = peer->to_string();
    if (peer->family() == AF_INET6 && !a.empty() && a.front() == '[') {
        out.append(a, 1, a.find(']') - 1);
    } else {
        out.append(a, 0, a.rfind(':'));
    }
}

void append_field(std::string& out, std::string_view name, std::string_view value) {
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
}

}  // namespace

bool hop_fields::contains(std::string_view name) const noexcept {
    if (fixed_hop_field(name)) return true;
    for (const header& f : all_) {
        if (!iequals(f.name, "connection")) continue;
        std::string_view v = f.value;
        while (!v.empty()) {
            size_t comma = v.find(',');
            if (iequals(trim(v.substr(0, comma)), name)) return true;
            if (comma == std::string_view::npos) break;
            v.remove_prefix(comma + 1);
        }
    }
    return false;
}

void append_request_head(std::string& out, const request& req, const request_line& line,
                         upstream_body body, const proxy_common_options& o) {
    std::string_view m = req.method_name();
    out += m.empty() ? method_name(req.method()) : m;
    out += ' ';
    out += line.target;
    out += " HTTP/1.1\r\nHost: ";
    out += line.host;
    out += "\r\n";
    const hop_fields hop(req.headers());
    std::string_view xff, cookie_sep;
    bool cookies = false;
    for (const header& f : req.headers()) {
        std::string_view n = f.name;
        if (n.empty() || n[0] == ':' || hop.contains(n) || iequals(n, "host") || iequals(n, "content-length") ||
            iequals(n, "expect"))  // 100-continue is this hop's: read_body answers it
            continue;
        if (o.x_forwarded) {
            if (iequals(n, "x-forwarded-for")) {
                xff = f.value;  // the last one; earlier ones are folded into it below
                continue;
            }
            if (iequals(n, "x-forwarded-proto") || iequals(n, "x-forwarded-host")) continue;
        }
        if (req.version_major() == 2 && iequals(n, "cookie")) {
            // HTTP/2 may split Cookie into several fields; HTTP/1.1 wants one (RFC 9113 8.2.3).
            if (!cookies) out += "Cookie: ";
            out += cookie_sep;
            out += f.value;
            cookie_sep = "; ";
            cookies = true;
            continue;
        }
        append_field(out, n, f.value);
    }
    if (cookies) out += "\r\n";
    if (o.x_forwarded) {
        out += "X-Forwarded-For: ";
        for (const header& f : req.headers())
            if (iequals(f.name, "x-forwarded-for") && f.value.data() != xff.data()) {
                out += f.value;
                out += ", ";
            }
        if (!xff.empty()) {
            out += xff;
            out += ", ";
        }
        append_client_ip(out, const_cast<request&>(req).stream());
        out += "\r\nX-Forwarded-Proto: ";
        out += dynamic_cast<net::tls::stream*>(&const_cast<request&>(req).stream()) ? "https" : "http";
        out += "\r\n";
        if (!req.host().empty()) append_field(out, "X-Forwarded-Host", req.host());
    }
    if (!o.via.empty()) append_field(out, "Via", o.via);
    if (body == upstream_body::chunked) {
        out += "Transfer-Encoding: chunked\r\n";
    } else if (body == upstream_body::length) {
        out += "Content-Length: ";
        char d[24];
        auto r = std::to_chars(d, d + sizeof d, req.content_length());
        out.append(d, r.ptr);
        out += "\r\n";
    }
    out += "\r\n";
}

void append_response_fields(std::string& out, const response_head& h, const proxy_common_options& o) {
    const hop_fields hop({h.headers, h.header_count});
    for (size_t i = 0; i < h.header_count; ++i) {
        std::string_view n = h.headers[i].name;
        // Framing is this hop's (the server frames what it sends); Date and Server are the
        // server's own fields.
        if (hop.contains(n) || iequals(n, "content-length") || iequals(n, "date") || iequals(n, "server")) continue;
        append_field(out, n, h.headers[i].value);
    }
    if (!o.via.empty()) append_field(out, "Via", o.via);
}

}  // namespace gluon::http::detail
