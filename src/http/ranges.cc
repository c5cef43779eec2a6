#include "ranges.h"

#include <algorithm>
#include <charconv>
#include <random>

namespace gluon::http::detail {
namespace {

bool number(std::string_view s, uint64_t& v) {
    if (s.empty()) return false;
    auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    return r.ec == std::errc{} && r.ptr == s.data() + s.size();
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

bool bytes_unit(std::string_view u) {
    if (u.size() != 5) return false;
    for (size_t i = 0; i < 5; ++i)
        if ((u[i] | 0x20) != "bytes"[i]) return false;
    return true;
}

// One range-spec: "first-last", "first-" or "-suffix". False if malformed; `r.len` 0 when it
// does not overlap the representation.
bool one_range(std::string_view spec, uint64_t size, byte_range& r) {
    const size_t dash = spec.find('-');
    if (dash == std::string_view::npos) return false;
    std::string_view a = spec.substr(0, dash), b = spec.substr(dash + 1);
    uint64_t first = 0, last = 0;
    if (a.empty()) {  // the last `last` bytes
        if (!number(b, last)) return false;
        r = {size - std::min(last, size), std::min(last, size)};
        return true;
    }
    if (!number(a, first)) return false;
    if (b.empty()) last = UINT64_MAX;
    else if (!number(b, last) || last < first) return false;
    if (first >= size) {
        r = {first, 0};
        return true;
    }
    r = {first, std::min(last, size - 1) - first + 1};
    return true;
}

// parse_ranges, but `out` may be left partly filled when the answer is not `parts`.
range_answer parse_into(std::string_view field, uint64_t size, std::vector<byte_range>& out) {
    out.clear();
    const size_t eq = field.find('=');
    if (eq == std::string_view::npos || !bytes_unit(trim(field.substr(0, eq)))) return range_answer::whole;
    std::string_view list = field.substr(eq + 1);
    size_t specs = 0;
    while (true) {
        const size_t comma = list.find(',');
        std::string_view spec = trim(list.substr(0, comma));
        if (!spec.empty()) {  // (empty list elements are allowed)
            if (++specs > k_max_ranges) return range_answer::whole;
            byte_range r;
            if (!one_range(spec, size, r)) return range_answer::whole;
            if (r.len) out.push_back(r);
        }
        if (comma == std::string_view::npos) break;
        list.remove_prefix(comma + 1);
    }
    if (specs == 0) return range_answer::whole;
    if (out.empty()) return range_answer::unsatisfiable;
    std::sort(out.begin(), out.end(), [](const byte_range& x, const byte_range& y) { return x.first < y.first; });
    size_t kept = 0;
    for (size_t i = 1; i < out.size(); ++i) {
        byte_range& last = out[kept];
        if (out[i].first <= last.first + last.len) {  // overlapping or adjacent: one range
            last.len = std::max(last.first + last.len, out[i].first + out[i].len) - last.first;
        } else {
            out[++kept] = out[i];
        }
    }
    out.resize(kept + 1);
    return range_answer::parts;
}

}  // namespace

range_answer parse_ranges(std::string_view field, uint64_t size, std::vector<byte_range>& out) {
    const range_answer a = parse_into(field, size, out);
    if (a != range_answer::parts) out.clear();
    return a;
}

std::string content_range(const byte_range& r, uint64_t size) {
    return "bytes " + std::to_string(r.first) + "-" + std::to_string(r.first + r.len - 1) + "/" + std::to_string(size);
}

std::string new_boundary() {
    thread_local std::mt19937_64 rng{std::random_device{}()};
    static constexpr char hex[] = "0123456789abcdef";
    std::string b(24, '0');
    uint64_t x = rng(), y = rng();
    for (size_t i = 0; i < 16; ++i, x >>= 4) b[i] = hex[x & 15];
    for (size_t i = 16; i < 24; ++i, y >>= 4) b[i] = hex[y & 15];
    return b;
}

}  // namespace gluon::http::detail
