// The head parser: find the blank line first (linear over the bytes as they arrive), then one
// validating pass over the complete head, table-driven, with a 16-byte scan over field values.
#include "gluon/http/parser.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

#include "chars.h"
#include "gluon/common/ascii.h"
#include "lists.h"

namespace gluon::http {

using detail::for_each_element;
using detail::is_hex;
using detail::is_reg_name_char;
using detail::is_tchar;
using detail::parse_decimal;
using detail::trim;

bool iequals(std::string_view a, std::string_view b) noexcept { return ascii_iequals(a, b); }

std::string_view method_name(method m) noexcept {
    static constexpr std::string_view names[] = {"GET",     "HEAD",    "POST",  "PUT",   "DELETE",
                                                 "CONNECT", "OPTIONS", "TRACE", "PATCH", ""};
    return names[static_cast<int>(m)];
}

std::string_view message_head::find(std::string_view name) const noexcept {
    for (size_t i = 0; i < header_count; ++i)
        if (iequals(headers[i].name, name)) return headers[i].value;
    return {};
}

namespace {

parse_result bad(uint16_t status, const char* why) noexcept {
    return {parse_result::invalid, status, 0, why};
}

/// Finds the end of the head (just past its blank line). Leading empty lines (allowed before a
/// request line) are skipped and reported in `skip`. Every LF must follow a CR.
parse_result find_head_end(std::string_view buf, const limits& lim, size_t& scanned,
                           size_t& skip) noexcept {
    const char* b = buf.data();
    size_t n = buf.size();
    skip = 0;
    while (skip + 1 < n && skip < lim.max_head_bytes && b[skip] == '\r' && b[skip + 1] == '\n') skip += 2;
    size_t line = scanned > skip ? scanned : skip;  // start of the line being searched
    size_t limit = skip + lim.max_head_bytes;
    size_t end = n < limit ? n : limit;
    while (line < end) {
        const void* lf = std::memchr(b + line, '\n', end - line);
        if (!lf) break;
        size_t p = static_cast<const char*>(lf) - b;
        if (p == 0 || b[p - 1] != '\r') return bad(400, "bare LF");
        if (p == line + 1 && line > skip) return {parse_result::complete, 0, p + 1, ""};
        line = p + 1;
    }
    scanned = line;
    if (n >= limit) {
        // No end within the limit: a start line that never ended is a target too long.
        return line == skip ? bad(414, "start line too long") : bad(431, "header section too large");
    }
    return {parse_result::incomplete};
}

/// Scans a field value from p; stops at the CR that ends the line. Returns nullptr on a byte
/// a value may not hold (a control byte other than HTAB, DEL, a CR not before LF).
const char* scan_value(const char* p, const char* end) noexcept {
    for (;;) {
#if defined(__SSE2__)
        while (end - p >= 16) {
            __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
            __m128i ctl = _mm_cmpeq_epi8(_mm_max_epu8(v, _mm_set1_epi8(0x1f)), _mm_set1_epi8(0x1f));
            __m128i del = _mm_cmpeq_epi8(v, _mm_set1_epi8(0x7f));
            int mask = _mm_movemask_epi8(_mm_or_si128(ctl, del));
            if (mask) {
                p += __builtin_ctz(static_cast<unsigned>(mask));
                break;
            }
            p += 16;
        }
#endif
        while (p < end && detail::is_vchar_or_sp(*p)) ++p;
        if (p >= end) return nullptr;  // cannot happen inside a complete head: lines end in CRLF
        if (*p == '\t') {
            ++p;
            continue;
        }
        if (*p == '\r' && p + 1 < end && p[1] == '\n') return p;
        return nullptr;
    }
}

/// The inside of an IP-literal's brackets: an IPv6 address in any of its text forms, or an
/// IPvFuture ("v" 1*HEXDIG "." 1*( unreserved / sub-delims / ":" ), RFC 3986 3.2.2).
bool valid_ip_literal(std::string_view s) noexcept {
    if (!s.empty() && (s[0] == 'v' || s[0] == 'V')) {
        size_t i = 1;
        while (i < s.size() && is_hex(s[i])) ++i;
        if (i == 1 || i + 1 >= s.size() || s[i] != '.') return false;
        for (++i; i < s.size(); ++i)
            if (s[i] != ':' && (!is_reg_name_char(s[i]) || s[i] == '%')) return false;
        return true;
    }
    char text[INET6_ADDRSTRLEN];
    if (s.size() >= sizeof text) return false;
    std::memcpy(text, s.data(), s.size());
    text[s.size()] = '\0';
    in6_addr a;
    return ::inet_pton(AF_INET6, text, &a) == 1;
}

/// Whether `a` is uri-host [ ":" port ] (RFC 3986 3.2.2, 3.2.3), the form of a Host field and
/// of a target's authority: an IP literal in brackets or a reg-name (an IPv4 address is one
/// too). The host may be empty unless need_host; the port may be absent unless need_port.
/// Userinfo is refused with the rest: '@' is no reg-name character, and an http(s) URI may not
/// carry it (RFC 9110 4.2.4).
bool valid_authority(std::string_view a, bool need_host, bool need_port) noexcept {
    size_t i = 0;
    if (!a.empty() && a[0] == '[') {
        size_t close = a.find(']');
        if (close == std::string_view::npos || !valid_ip_literal(a.substr(1, close - 1))) return false;
        i = close + 1;
    } else {
        while (i < a.size() && a[i] != ':') {
            if (!is_reg_name_char(a[i])) return false;
            if (a[i] == '%') {
                if (i + 2 >= a.size() || !is_hex(a[i + 1]) || !is_hex(a[i + 2])) return false;
                i += 2;
            }
            ++i;
        }
        if (i == 0 && need_host) return false;
    }
    if (i == a.size()) return !need_port;
    if (a[i] != ':') return false;
    size_t digits = 0;
    for (++i; i < a.size(); ++i, ++digits)
        if (a[i] < '0' || a[i] > '9') return false;
    return digits > 0 || !need_port;
}

/// Splits a request target into path, query and (absolute-form) authority, or returns why it
/// is none of the forms RFC 9112 3.2 allows: origin-form ("/p?q") with any method,
/// absolute-form with an http or https URI, authority-form ("host:port") with CONNECT, which
/// takes nothing else, and "*" with OPTIONS. A request that means something else than what a
/// proxy in front of the server read must not be served as if it were "/": that is how access
/// rules are bypassed. A fragment is the client's own and never sent (RFC 9110 4.2.5), so '#'
/// is refused too. Authority-form and "*" are their own path.
const char* split_target(std::string_view t, method verb, request_head& out) noexcept {
    out.path = out.query = out.target_authority = {};
    if (t.find('#') != std::string_view::npos) return "fragment in request target";
    if (verb == method::connect) {
        if (!valid_authority(t, true, true)) return "CONNECT target is not host:port";
        out.path = t;
        return nullptr;
    }
    std::string_view rest = t;
    if (t == "*") {
        if (verb != method::options) return "asterisk-form without OPTIONS";
        out.path = t;
        return nullptr;
    }
    if (t[0] != '/') {
        size_t colon = t.find("://");
        std::string_view scheme = t.substr(0, colon);
        if (colon == std::string_view::npos || !(iequals(scheme, "http") || iequals(scheme, "https")))
            return "request target in no valid form";
        std::string_view after = t.substr(colon + 3);
        size_t end = after.find_first_of("/?");
        std::string_view authority = after.substr(0, end);
        if (!valid_authority(authority, true, false)) return "invalid authority in request target";
        out.target_authority = authority;
        rest = end == std::string_view::npos ? std::string_view() : after.substr(end);
        // "http://h" and "http://h?q" have the empty path, which origin-form writes "/" (RFC 9112 3.2.1).
        if (rest.empty() || rest[0] == '?') {
            out.path = "/";
            if (!rest.empty()) out.query = rest.substr(1);
            return nullptr;
        }
    }
    size_t q = rest.find('?');
    out.path = rest.substr(0, q);
    if (q != std::string_view::npos) out.query = rest.substr(q + 1);
    return nullptr;
}

/// What the field section says about framing and the connection.
struct field_facts {
    bool has_length = false;
    uint64_t length = 0;
    bool chunked = false;       // chunked is the final coding
    bool other_coding = false;  // a coding other than chunked
    bool has_te = false;
    int hosts = 0;
    std::string_view host;
    bool conn_close = false, conn_keep_alive = false, conn_upgrade = false;
    bool has_upgrade = false;
    bool expect_continue = false, expect_other = false;
};

/// Parses the field lines from p (the start of the first field line) to the head's end.
parse_result parse_fields(const char* p, const char* end, message_head& out, field_facts& f,
                          const limits& lim) noexcept {
    out.header_count = 0;
    for (;;) {
        if (end - p < 2) return bad(400, "truncated head");
        if (p[0] == '\r') {
            if (p[1] != '\n') return bad(400, "bare CR");
            return {parse_result::complete};
        }
        if (*p == ' ' || *p == '\t') return bad(400, "obs-fold");
        const char* name = p;
        while (is_tchar(*p)) ++p;
        if (p == name) return bad(400, "invalid field name");
        if (*p != ':') return bad(400, *p == ' ' || *p == '\t' ? "whitespace before colon" : "invalid field name");
        std::string_view nm(name, static_cast<size_t>(p - name));
        const char* vb = p + 1;
        const char* cr = scan_value(vb, end);
        if (!cr) return bad(400, "invalid byte in field value");
        std::string_view value = trim(vb, cr);
        p = cr + 2;
        if (out.header_count == lim.max_headers) return bad(431, "too many header fields");
        out.headers[out.header_count++] = {nm, value};

        // The fields that decide framing and the connection's fate.
        switch (nm.size()) {
            case 4:
                if (iequals(nm, "host")) {
                    ++f.hosts;
                    f.host = value;
                }
                break;
            case 6:
                if (iequals(nm, "expect")) {
                    if (iequals(value, "100-continue")) f.expect_continue = true;
                    else f.expect_other = true;
                }
                break;
            case 7:
                if (iequals(nm, "upgrade")) f.has_upgrade = true;
                break;
            case 10:
                if (iequals(nm, "connection")) {
                    for_each_element(value, [&](std::string_view t) {
                        if (iequals(t, "close")) f.conn_close = true;
                        else if (iequals(t, "keep-alive")) f.conn_keep_alive = true;
                        else if (iequals(t, "upgrade")) f.conn_upgrade = true;
                        return true;
                    });
                }
                break;
            case 14:
                if (iequals(nm, "content-length")) {
                    bool ok = true;
                    bool any = false;
                    for_each_element(value, [&](std::string_view e) {
                        uint64_t v;
                        any = true;
                        if (!parse_decimal(e, v) || (f.has_length && v != f.length)) return ok = false;
                        f.has_length = true;
                        f.length = v;
                        return true;
                    });
                    if (!ok || !any) return bad(400, "invalid or conflicting Content-Length");
                }
                break;
            case 17:
                if (iequals(nm, "transfer-encoding")) {
                    f.has_te = true;
                    bool ok = true;
                    for_each_element(value, [&](std::string_view c) {
                        if (f.chunked) return ok = false;  // chunked must be last, and only once
                        if (iequals(c, "chunked")) f.chunked = true;
                        else f.other_coding = true;
                        return true;
                    });
                    if (!ok) return bad(400, "chunked is not the final transfer coding");
                }
                break;
        }
    }
}

/// Parses "HTTP/1.x" at p; returns the minor version, -1 for a malformed version, -2 for a
/// well-formed one that is not 1.x.
int parse_version(const char* p, const char* end) noexcept {
    if (end - p < 8 || std::memcmp(p, "HTTP/", 5) != 0) return -1;
    char ma = p[5], dot = p[6], mi = p[7];
    if (ma < '0' || ma > '9' || dot != '.' || mi < '0' || mi > '9') return -1;
    if (ma != '1') return -2;
    return mi - '0';
}

method classify(std::string_view m) noexcept {
    switch (m.size()) {
        case 3:
            if (m == "GET") return method::get;
            if (m == "PUT") return method::put;
            break;
        case 4:
            if (m == "HEAD") return method::head;
            if (m == "POST") return method::post;
            break;
        case 5:
            if (m == "PATCH") return method::patch;
            if (m == "TRACE") return method::trace;
            break;
        case 6:
            if (m == "DELETE") return method::delete_;
            break;
        case 7:
            if (m == "OPTIONS") return method::options;
            if (m == "CONNECT") return method::connect;
            break;
    }
    return method::other;
}

}  // namespace

method method_from_name(std::string_view name) noexcept { return classify(name); }

parse_result parse_request(std::string_view buf, request_head& out, const limits& lim,
                           size_t& scanned) noexcept {
    size_t skip;
    parse_result r = find_head_end(buf, lim, scanned, skip);
    if (r.state != parse_result::complete) return r;
    size_t head_len = r.consumed;
    const char* p = buf.data() + skip;
    const char* end = buf.data() + head_len;

    // request-line = method SP request-target SP HTTP-version CRLF
    const char* m = p;
    while (is_tchar(*p)) ++p;
    if (p == m || *p != ' ') return bad(400, "invalid method");
    out.method_name = {m, static_cast<size_t>(p - m)};
    out.verb = classify(out.method_name);
    const char* t = ++p;
    while (detail::is_target_char(*p)) ++p;
    if (p == t || *p != ' ') return bad(400, "invalid request target");
    out.target = {t, static_cast<size_t>(p - t)};
    ++p;
    int minor = parse_version(p, end);
    if (minor == -1) return bad(400, "invalid HTTP version");
    if (minor == -2) return bad(505, "HTTP version not supported");
    p += 8;
    if (p[0] != '\r' || p[1] != '\n') return bad(400, "invalid request line");
    p += 2;
    out.version_minor = static_cast<uint8_t>(minor > 1 ? 1 : minor);
    if (const char* why = split_target(out.target, out.verb, out)) return bad(400, why);

    field_facts f;
    parse_result fr = parse_fields(p, end, out, f, lim);
    if (fr.state != parse_result::complete) return fr;

    if (f.has_te) {
        if (out.version_minor == 0) return bad(400, "Transfer-Encoding in HTTP/1.0");
        if (f.has_length) return bad(400, "Content-Length with Transfer-Encoding");
        if (f.other_coding) return bad(501, "unsupported transfer coding");
        if (!f.chunked) return bad(400, "invalid Transfer-Encoding");
        out.body = framing::chunked;
    } else if (f.has_length && f.length > 0) {
        out.body = framing::length;
    } else {
        out.body = framing::none;
    }
    out.content_length = f.has_length ? f.length : 0;
    if (out.version_minor == 1 && f.hosts != 1) return bad(400, f.hosts ? "repeated Host" : "missing Host");
    if (f.hosts > 1) return bad(400, "repeated Host");
    // RFC 9112 3.2: a Host that is not uri-host[:port] is 400. The empty value is valid: it is
    // what a client sends for a URI without an authority.
    if (f.hosts == 1 && !valid_authority(f.host, false, false)) return bad(400, "invalid Host");
    if (f.expect_other) return bad(417, "unsupported expectation");
    // An absolute-form target names the host itself, and the Host field is then ignored (RFC
    // 9112 3.2.2); it must still be there and valid, for a proxy's sake.
    out.host = out.target_authority.empty() ? f.host : out.target_authority;
    out.expect_continue = f.expect_continue && out.version_minor == 1;
    out.keep_alive = out.version_minor == 1 ? !f.conn_close : (f.conn_keep_alive && !f.conn_close);
    out.upgrade = f.conn_upgrade && f.has_upgrade;
    return {parse_result::complete, 0, head_len, ""};
}

parse_result parse_response(std::string_view buf, response_head& out, const limits& lim,
                            size_t& scanned, method request_verb) noexcept {
    size_t skip;
    parse_result r = find_head_end(buf, lim, scanned, skip);
    if (r.state != parse_result::complete) return r;
    if (skip) return bad(502, "empty line before status line");
    size_t head_len = r.consumed;
    const char* p = buf.data();
    const char* end = p + head_len;

    // status-line = HTTP-version SP status-code SP [ reason-phrase ] CRLF
    int minor = parse_version(p, end);
    if (minor < 0) return bad(502, "invalid HTTP version");
    p += 8;
    if (*p != ' ' || end - p < 6) return bad(502, "invalid status line");
    ++p;
    if (p[0] < '1' || p[0] > '9' || p[1] < '0' || p[1] > '9' || p[2] < '0' || p[2] > '9')
        return bad(502, "invalid status code");
    out.status = static_cast<uint16_t>((p[0] - '0') * 100 + (p[1] - '0') * 10 + (p[2] - '0'));
    p += 3;
    const char* reason = p;
    if (*p == ' ') {
        reason = ++p;
        const char* cr = scan_value(p, end);
        if (!cr) return bad(502, "invalid reason phrase");
        p = cr;
    }
    if (p[0] != '\r' || p[1] != '\n') return bad(502, "invalid status line");
    out.reason = {reason, static_cast<size_t>(p - reason)};
    p += 2;
    out.version_minor = static_cast<uint8_t>(minor > 1 ? 1 : minor);

    field_facts f;
    parse_result fr = parse_fields(p, end, out, f, lim);
    if (fr.state != parse_result::complete) return fr.status == 400 ? bad(502, fr.why) : fr;

    out.keep_alive = out.version_minor == 1 ? !f.conn_close : (f.conn_keep_alive && !f.conn_close);
    out.upgrade = f.conn_upgrade && f.has_upgrade;
    out.content_length = f.has_length ? f.length : 0;
    uint16_t s = out.status;
    if (request_verb == method::head || (s >= 100 && s < 200) || s == 204 || s == 304 ||
        (request_verb == method::connect && s >= 200 && s < 300)) {
        out.body = framing::none;
    } else if (f.has_te) {
        // Transfer-Encoding overrides Content-Length (RFC 9112 6.3); such a connection is not reused.
        if (f.has_length) out.keep_alive = false;
        out.body = f.chunked ? framing::chunked : framing::to_close;
        if (!f.chunked) out.keep_alive = false;
    } else if (f.has_length) {
        out.body = f.length ? framing::length : framing::none;
    } else {
        out.body = framing::to_close;
        out.keep_alive = false;
    }
    return {parse_result::complete, 0, head_len, ""};
}

}  // namespace gluon::http
