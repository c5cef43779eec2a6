#include "ranges.h"

#include <algorithm>
#include <random>

#include "gluon/http/parser.h"
#include "lists.h"

namespace gluon::http::detail {
namespace {

// One range-spec: "first-last", "first-" or "-suffix". False if malformed; `r.len` 0 when it
// does not overlap the representation.
bool one_range(std::string_view spec, uint64_t size, byte_range& r) {
    const size_t dash = spec.find('-');
    if (dash == std::string_view::npos) return false;
    std::string_view a = spec.substr(0, dash), b = spec.substr(dash + 1);
    uint64_t first = 0, last = 0;
    if (a.empty()) {  // the last `last` bytes
        if (!parse_decimal(b, last)) return false;
        r = {size - std::min(last, size), std::min(last, size)};
        return true;
    }
    if (!parse_decimal(a, first)) return false;
    if (b.empty()) last = UINT64_MAX;
    else if (!parse_decimal(b, last) || last < first) return false;
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
    if (eq == std::string_view::npos || !iequals(trim(field.data(), field.data() + eq), "bytes")) return range_answer::whole;
    size_t specs = 0;
    const bool valid = for_each_element(field.substr(eq + 1), [&](std::string_view spec) {
        byte_range r;
        if (++specs > k_max_ranges || !one_range(spec, size, r)) return false;
        if (r.len) out.push_back(r);
        return true;
    });
    if (!valid || specs == 0) return range_answer::whole;
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
