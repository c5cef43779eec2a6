#include "path.h"

#include "chars.h"

namespace gluon::http::detail {

namespace {

bool is_unreserved(char c) noexcept {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
           c == '_' || c == '~';
}

char upper_hex(char c) noexcept { return c >= 'a' && c <= 'f' ? static_cast<char>(c - 32) : c; }

// Whether raw may change: an escape, an empty segment, or a segment starting with '.'.
bool may_change(std::string_view raw) noexcept {
    for (size_t i = 0; i < raw.size(); ++i) {
        const char c = raw[i];
        if (c == '%') return true;
        if (c == '/' && i + 1 < raw.size() && (raw[i + 1] == '/' || raw[i + 1] == '.')) return true;
    }
    return false;
}

}  // namespace

result<std::string_view> normal_path(std::string_view raw, std::string& storage) {
    if (raw.empty() || raw[0] != '/' || !may_change(raw)) return raw;
    std::string& out = storage;
    out.clear();
    out.reserve(raw.size());
    // Decode the escapes of unreserved characters first, so that "%2e%2E" is a ".." segment.
    std::string decoded;
    decoded.reserve(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) {
        char c = raw[i];
        if (c == '%' && i + 2 < raw.size() && is_hex(raw[i + 1]) && is_hex(raw[i + 2])) {
            const char v = static_cast<char>(hex_value(raw[i + 1]) * 16 + hex_value(raw[i + 2]));
            if (is_unreserved(v)) {
                decoded += v;
            } else {
                decoded += '%';
                decoded += upper_hex(raw[i + 1]);
                decoded += upper_hex(raw[i + 2]);
            }
            i += 2;
            continue;
        }
        decoded += c;  // (a bad escape stays as it is: whoever decodes the path refuses it)
    }
    // Segments: empty ones and "." dropped, ".." takes the last one off. A path ending in '/'
    // (or in a segment dropped or undone) keeps its final '/'.
    size_t i = 1;
    bool dir = false;
    while (i <= decoded.size()) {
        size_t end = decoded.find('/', i);
        if (end == std::string::npos) end = decoded.size();
        std::string_view seg(decoded.data() + i, end - i);
        dir = true;
        if (seg == "..") {
            if (out.empty()) return errno_error(EINVAL);
            out.resize(out.rfind('/'));
        } else if (!seg.empty() && seg != ".") {
            out += '/';
            out += seg;
            dir = false;
        }
        i = end + 1;
    }
    if (out.empty() || dir) out += '/';
    return std::string_view(out);
}

}  // namespace gluon::http::detail
