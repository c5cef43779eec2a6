// Field-value pieces of RFC 9110 that several parts of the HTTP module read: optional
// whitespace, comma-separated lists and decimal numbers. Private to src/http.
#pragma once

#include <cstdint>
#include <string_view>

namespace gluon::http::detail {

/// [b, e) without leading and trailing SP and HTAB (OWS).
inline std::string_view trim(const char* b, const char* e) noexcept {
    while (b < e && (*b == ' ' || *b == '\t')) ++b;
    while (e > b && (e[-1] == ' ' || e[-1] == '\t')) --e;
    return {b, static_cast<size_t>(e - b)};
}

/// Calls f(element) for each non-empty element of a comma-separated list (RFC 9110 5.6.1),
/// trimmed; stops when f returns false, and returns false then.
template <typename F>
bool for_each_element(std::string_view v, F&& f) {
    size_t i = 0;
    while (i <= v.size()) {
        size_t c = v.find(',', i);
        if (c == std::string_view::npos) c = v.size();
        std::string_view e = trim(v.data() + i, v.data() + c);
        if (!e.empty() && !f(e)) return false;
        i = c + 1;
    }
    return true;
}

/// A non-empty run of digits, at most 18 (so it cannot overflow int64).
inline bool parse_decimal(std::string_view s, uint64_t& out) noexcept {
    if (s.empty() || s.size() > 18) return false;
    uint64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return false;
        v = v * 10 + static_cast<uint64_t>(c - '0');
    }
    out = v;
    return true;
}

}  // namespace gluon::http::detail
