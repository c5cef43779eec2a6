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

/// What a proxy does with a field, found with one comparison for most names (by length first).
enum class kind : uint8_t { other, hop, host, content_length, expect, cookie, xff, xf_own, date, server };

kind classify(std::string_view n) noexcept {
    switch (n.size()) {
    case 2:
        if (iequals(n, "te")) return kind::hop;
        break;
    case 4:
        if (iequals(n, "host")) return kind::host;
        if (iequals(n, "date")) return kind::date;
        break;
    case 6:
        if (iequals(n, "expect")) return kind::expect;
        if (iequals(n, "cookie")) return kind::cookie;
        if (iequals(n, "server")) return kind::server;
        break;
    case 7:
        if (iequals(n, "trailer") || iequals(n, "upgrade")) return kind::hop;
        break;
    case 10:
        if (iequals(n, "connection") || iequals(n, "keep-alive")) return kind::hop;
        break;
    case 14:
        if (iequals(n, "content-length")) return kind::content_length;
        break;
    case 15:
        if (iequals(n, "x-forwarded-for")) return kind::xff;
        break;
    case 16:
        if (iequals(n, "x-forwarded-host")) return kind::xf_own;
        break;
    case 17:
        if (iequals(n, "transfer-encoding")) return kind::hop;
        if (iequals(n, "x-forwarded-proto")) return kind::xf_own;
        break;
    default: break;
    }
    return starts_with_i(n, "proxy-") ? kind::hop : kind::other;
}

/// Calls fn(token) for each comma-separated token of a Connection field's value.
template <class F>
void for_each_token(std::string_view v, F&& fn) {
    while (!v.empty()) {
        size_t comma = v.find(',');
        std::string_view t = trim(v.substr(0, comma));
        if (!t.empty()) fn(t);
        if (comma == std::string_view::npos) break;
        v.remove_prefix(comma + 1);
    }
}

void append_field(std::string& out, std::string_view name, std::string_view value) {
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
}

}  // namespace

hop_fields::hop_fields(std::span<const header> all) noexcept : all_(all) {
    for (const header& f : all) {
        if (f.name.size() != 10 || !iequals(f.name, "connection")) continue;
        for_each_token(f.value, [&](std::string_view t) {
            if (count_ < k_max_named) named_[count_++] = t;
            else overflow_ = true;
        });
    }
}

bool hop_fields::named(std::string_view name) const noexcept {
    for (size_t i = 0; i < count_; ++i)
        if (iequals(named_[i], name)) return true;
    if (!overflow_) return false;
    bool found = false;
    for (const header& f : all_)
        if (iequals(f.name, "connection"))
            for_each_token(f.value, [&](std::string_view t) { found = found || iequals(t, name); });
    return found;
}

bool hop_fields::contains(std::string_view name) const noexcept {
    return classify(name) == kind::hop || named(name);
}

void append_request_head(std::string& out, request& req, const request_line& line, upstream_body body,
                         const proxy_common_options& o) {
    std::string_view m = req.method_name();
    out += m.empty() ? method_name(req.method()) : m;
    out += ' ';
    out += line.target;
    out += " HTTP/1.1\r\nHost: ";
    out += line.host;
    out += "\r\n";
    const hop_fields hop(req.headers());
    bool cookies = false, xff = false;
    for (const header& f : req.headers()) {
        std::string_view n = f.name;
        if (n.empty() || n[0] == ':') continue;
        switch (classify(n)) {
        case kind::hop:
        case kind::host:
        case kind::content_length:  // framing is this hop's: set below
        case kind::expect:          // 100-continue is this hop's: read_body answers it
            continue;
        case kind::xff:
            if (o.x_forwarded) {
                xff = true;  // folded into the one sent below
                continue;
            }
            break;
        case kind::xf_own:
            if (o.x_forwarded) continue;  // replaced below
            break;
        case kind::cookie:
            if (req.version_major() == 2) {
                // HTTP/2 may split Cookie into several fields; HTTP/1.1 wants one (RFC 9113 8.2.3).
                out += cookies ? "; " : "Cookie: ";
                out += f.value;
                cookies = true;
                continue;
            }
            break;
        default: break;
        }
        if (hop.named(n)) continue;
        append_field(out, n, f.value);
    }
    if (cookies) out += "\r\n";
    if (o.x_forwarded) {
        out += "X-Forwarded-For: ";
        if (xff)
            for (const header& f : req.headers())
                if (classify(f.name) == kind::xff) {
                    out += f.value;
                    out += ", ";
                }
        std::string_view ip = req.client_ip();
        out += ip.empty() ? std::string_view("unknown") : ip;
        out += "\r\nX-Forwarded-Proto: ";
        out += dynamic_cast<net::tls::stream*>(&req.stream()) ? "https" : "http";
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
        switch (classify(n)) {
        // Framing is this hop's (the server frames what it sends); Date and Server are the
        // server's own fields.
        case kind::hop:
        case kind::content_length:
        case kind::date:
        case kind::server: continue;
        default: break;
        }
        if (hop.named(n)) continue;
        append_field(out, n, h.headers[i].value);
    }
    if (!o.via.empty()) append_field(out, "Via", o.via);
}

}  // namespace gluon::http::detail
