#include "resp.h"

#include <charconv>
#include <cstring>

namespace gluon::redis {

const char* kind_name(reply::kind k) noexcept {
    switch (k) {
        case reply::kind::nil: return "nil";
        case reply::kind::simple: return "simple string";
        case reply::kind::error: return "error";
        case reply::kind::integer: return "integer";
        case reply::kind::bulk: return "bulk string";
        case reply::kind::array: return "array";
        case reply::kind::double_: return "double";
        case reply::kind::boolean: return "boolean";
        case reply::kind::big_number: return "big number";
        case reply::kind::verbatim: return "verbatim string";
        case reply::kind::map: return "map";
        case reply::kind::set: return "set";
        case reply::kind::push: return "push";
    }
    return "?";
}

namespace detail {
namespace {

struct cursor {
    const char* p;
    const char* end;
    const decode_limits& lim;
};

// Results of the steps below: a step either completes, needs more bytes, or finds garbage.
constexpr int k_ok = 0, k_more = 1, k_bad = 2;

/// The line at c.p up to CRLF (not included); c.p moves past the CRLF.
int line(cursor& c, std::string_view& out) {
    const void* cr = std::memchr(c.p, '\r', static_cast<size_t>(c.end - c.p));
    if (!cr) return c.end - c.p > 64 * 1024 ? k_bad : k_more;  // a line header is short
    const char* q = static_cast<const char*>(cr);
    if (q + 1 >= c.end) return k_more;
    if (q[1] != '\n') return k_bad;
    out = {c.p, static_cast<size_t>(q - c.p)};
    c.p = q + 2;
    return k_ok;
}

bool to_int(std::string_view s, int64_t& v) {
    if (s.empty()) return false;
    auto [q, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && q == s.data() + s.size();
}

/// A length or count: -1 (null) or 0..max.
int length(std::string_view s, int64_t max, int64_t& n) {
    if (!to_int(s, n) || n < -1 || n > max) return k_bad;
    return k_ok;
}

int value(cursor& c, reply& r, unsigned depth);

/// n bytes of payload and their CRLF.
int blob(cursor& c, int64_t n, std::string& out) {
    if (c.end - c.p < n + 2) return k_more;
    if (c.p[n] != '\r' || c.p[n + 1] != '\n') return k_bad;
    out.assign(c.p, static_cast<size_t>(n));
    c.p += n + 2;
    return k_ok;
}

int aggregate(cursor& c, reply& r, int64_t n, unsigned depth, size_t per) {
    r.elements.clear();
    const size_t count = static_cast<size_t>(n) * per;
    if (static_cast<size_t>(c.end - c.p) < count * 3)  // each element >= 3 bytes
        return k_more;
    // Grown as elements decode, never sized from the header: nested headers would each claim
    // the same remaining bytes, and a few of them made a hostile reply of megabytes allocate
    // gigabytes before any element was read.
    for (size_t i = 0; i < count; ++i) {
        r.elements.emplace_back();
        if (int s = value(c, r.elements.back(), depth + 1)) return s;
    }
    return k_ok;
}

int value(cursor& c, reply& r, unsigned depth) {
    if (depth > c.lim.max_depth) return k_bad;
    if (c.p >= c.end) return k_more;
    char t = *c.p++;
    std::string_view l;
    if (int s = line(c, l)) return s;
    int64_t n = 0;
    const auto max_bulk = static_cast<int64_t>(c.lim.max_bulk), max_elems = static_cast<int64_t>(c.lim.max_elements);
    switch (t) {
        case '+':
            r.type = reply::kind::simple;
            r.str.assign(l);
            return k_ok;
        case '-':
            r.type = reply::kind::error;
            r.str.assign(l);
            return k_ok;
        case ':':
            r.type = reply::kind::integer;
            return to_int(l, r.integer) ? k_ok : k_bad;
        case '_':
            r.type = reply::kind::nil;
            return l.empty() ? k_ok : k_bad;
        case '#':
            r.type = reply::kind::boolean;
            if (l != "t" && l != "f") return k_bad;
            r.integer = l == "t";
            return k_ok;
        case ',': {
            r.type = reply::kind::double_;
            r.str.assign(l);
            if (l == "inf") r.number = __builtin_inf();
            else if (l == "-inf") r.number = -__builtin_inf();
            else if (l == "nan") r.number = __builtin_nan("");
            else {
                // std::from_chars, not strtod: strtod reads the decimal point of the C locale (a
                // program that set LC_NUMERIC to de_DE read "3.14" as 3, not RESP, and lost the
                // connection) and takes what RESP does not have (spaces before, hex, "infinity").
                // A value beyond a double's range is not one either.
                std::string_view v = l;
                if (v.size() > 1 && v[0] == '+' && v[1] != '-') v.remove_prefix(1);  // RESP3's sign
                const size_t first = !v.empty() && v[0] == '-' ? 1 : 0;
                if (v.size() <= first || !((v[first] >= '0' && v[first] <= '9') || v[first] == '.')) return k_bad;
                auto [q, ec] = std::from_chars(v.data(), v.data() + v.size(), r.number);
                if (ec != std::errc() || q != v.data() + v.size()) return k_bad;
            }
            return k_ok;
        }
        case '(':
            r.type = reply::kind::big_number;
            if (l.empty() || l.size() > 1024) return k_bad;
            for (size_t i = 0; i < l.size(); ++i)
                if (!(l[i] >= '0' && l[i] <= '9') && !(i == 0 && l[i] == '-' && l.size() > 1)) return k_bad;
            r.str.assign(l);
            return k_ok;
        case '$':
        case '!':
        case '=': {
            if (int s = length(l, max_bulk, n)) return s;
            if (n == -1) {
                if (t != '$') return k_bad;
                r.type = reply::kind::nil;
                return k_ok;
            }
            r.type = t == '$' ? reply::kind::bulk : t == '!' ? reply::kind::error : reply::kind::verbatim;
            if (int s = blob(c, n, r.str)) return s;
            if (t == '=') {  // "txt:" or "mkd:" then the text
                if (r.str.size() < 4 || r.str[3] != ':') return k_bad;
                r.str.erase(0, 4);
            }
            return k_ok;
        }
        case '*':
        case '~':
        case '>':
            if (int s = length(l, max_elems, n)) return s;
            if (n == -1) {
                if (t != '*') return k_bad;
                r.type = reply::kind::nil;
                return k_ok;
            }
            r.type = t == '*' ? reply::kind::array : t == '~' ? reply::kind::set : reply::kind::push;
            return aggregate(c, r, n, depth, 1);
        case '%':
            if (int s = length(l, max_elems, n)) return s;
            if (n == -1) return k_bad;
            r.type = reply::kind::map;
            return aggregate(c, r, n, depth, 2);
        case '|': {
            // Attributes describe the reply that follows; gluon keeps the reply only.
            if (int s = length(l, max_elems, n)) return s;
            if (n == -1) return k_bad;
            reply attrs;
            if (int s = aggregate(c, attrs, n, depth, 2)) return s;
            return value(c, r, depth + 1);
        }
        default:
            return k_bad;
    }
}

}  // namespace

bool reply_scanner::ready(const char* p, size_t n, const decode_limits& lim) noexcept {
    const auto max_bulk = static_cast<int64_t>(lim.max_bulk), max_elems = static_cast<int64_t>(lim.max_elements);
    while (pos_ < n) {
        if (depth_ > lim.max_depth) return true;  // an element deeper than decode() goes
        const char t = p[pos_];
        const void* cr = std::memchr(p + pos_, '\r', n - pos_);
        if (!cr) return n - pos_ > 64 * 1024;  // (a header line that long is garbage)
        const size_t eol = static_cast<size_t>(static_cast<const char*>(cr) - p);
        if (eol + 1 >= n) return false;
        const std::string_view l(p + pos_ + 1, eol - pos_ - 1);
        size_t next = eol + 2;
        int64_t opens = 0;  // elements this one is followed by as their aggregate
        int64_t v = 0;
        switch (t) {
            case '$':
            case '!':
            case '=':
                if (!to_int(l, v) || v < -1 || v > max_bulk) return true;
                if (v >= 0) {
                    if (n - next < static_cast<size_t>(v) + 2) return false;
                    next += static_cast<size_t>(v) + 2;
                }
                break;
            case '*':
            case '~':
            case '>':
            case '%':
            case '|':
                if (!to_int(l, v) || v < -1 || v > max_elems) return true;
                if (t == '|') opens = 2 * v + 1;  // its pairs, then the value they describe
                else if (v > 0) opens = t == '%' ? 2 * v : v;
                break;
            case '+':
            case '-':
            case ':':
            case '_':
            case '#':
            case ',':
            case '(':
                break;
            default: return true;
        }
        pos_ = next;
        if (opens > 0) {
            if (depth_ == k_max_depth) return true;
            left_[depth_++] = opens;
            continue;
        }
        // A whole element: it may complete the aggregates it ends.
        while (depth_ > 0 && --left_[depth_ - 1] == 0) --depth_;
        if (depth_ == 0) return true;
    }
    return false;
}

decode_status decode(const char* p, size_t n, reply& out, size_t& used, const decode_limits& lim) {
    cursor c{p, p + n, lim};
    switch (value(c, out, 0)) {
        case k_ok:
            used = static_cast<size_t>(c.p - p);
            return decode_status::complete;
        case k_more: return decode_status::incomplete;
        default: return decode_status::invalid;
    }
}

}  // namespace detail
}  // namespace gluon::redis
