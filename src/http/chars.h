// Character classes of RFC 9110/9112, as tables.
#pragma once

#include <array>
#include <cstdint>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace gluon::http::detail {

enum : uint8_t { c_tchar = 1, c_vchar_sp = 2, c_target = 4, c_hex = 8, c_reg_name = 16 };

constexpr std::array<uint8_t, 256> make_classes() {
    std::array<uint8_t, 256> t{};
    for (int c = 0; c < 256; ++c) {
        uint8_t k = 0;
        bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        // tchar = "!" / "#" / "$" / "%" / "&" / "'" / "*" / "+" / "-" / "." / "^" / "_" / "`" / "|" / "~" / DIGIT / ALPHA
        bool tsym = c == '!' || c == '#' || c == '$' || c == '%' || c == '&' || c == '\'' || c == '*' ||
                    c == '+' || c == '-' || c == '.' || c == '^' || c == '_' || c == '`' || c == '|' ||
                    c == '~';
        if (alnum || tsym) k |= c_tchar;
        // field-vchar = VCHAR / obs-text, and SP (HTAB is handled apart)
        if ((c >= 0x20 && c <= 0x7e) || c >= 0x80) k |= c_vchar_sp;
        // request-target: visible ASCII; no SP, no controls, no obs-text (URIs are percent-encoded)
        if (c > 0x20 && c < 0x7f) k |= c_target;
        if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) k |= c_hex;
        // reg-name = *( unreserved / pct-encoded / sub-delims ) (RFC 3986 3.2.2); '%' starts a
        // pct-encoded triplet, whose two hex digits the caller checks
        bool sub_delim = c == '!' || c == '$' || c == '&' || c == '\'' || c == '(' || c == ')' ||
                         c == '*' || c == '+' || c == ',' || c == ';' || c == '=';
        if (alnum || c == '-' || c == '.' || c == '_' || c == '~' || sub_delim || c == '%') k |= c_reg_name;
        t[static_cast<size_t>(c)] = k;
    }
    return t;
}

inline constexpr std::array<uint8_t, 256> k_classes = make_classes();

inline bool is_tchar(char c) noexcept { return k_classes[static_cast<uint8_t>(c)] & c_tchar; }
inline bool is_vchar_or_sp(char c) noexcept { return k_classes[static_cast<uint8_t>(c)] & c_vchar_sp; }
inline bool is_target_char(char c) noexcept { return k_classes[static_cast<uint8_t>(c)] & c_target; }
inline bool is_reg_name_char(char c) noexcept { return k_classes[static_cast<uint8_t>(c)] & c_reg_name; }
inline bool is_hex(char c) noexcept { return k_classes[static_cast<uint8_t>(c)] & c_hex; }
inline char lower(char c) noexcept { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; }
inline int hex_value(char c) noexcept {
    return c <= '9' ? c - '0' : (lower(c) - 'a' + 10);
}

}  // namespace gluon::http::detail
