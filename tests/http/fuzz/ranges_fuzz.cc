// libFuzzer target: the Range field's parser. The first two bytes give the representation's
// size (0-65535), the rest is the field. Whatever the field, the ranges given back are sorted,
// non-empty, inside the representation and apart from each other (merged when they touch), no
// more than the field listed, and none is given back unless the answer is `parts`.
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "http/ranges.h"

using namespace gluon::http::detail;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2) return 0;
    const uint64_t len = static_cast<uint64_t>(data[0]) | static_cast<uint64_t>(data[1]) << 8;
    std::string_view field(reinterpret_cast<const char*>(data) + 2, size - 2);
    std::vector<byte_range> out;
    const range_answer a = parse_ranges(field, len, out);
    if (a != range_answer::parts) {
        if (!out.empty()) std::abort();
        return 0;
    }
    if (out.empty() || out.size() > k_max_ranges) std::abort();
    for (size_t i = 0; i < out.size(); ++i) {
        if (out[i].len == 0 || out[i].first >= len || out[i].len > len - out[i].first) std::abort();
        if (i && out[i].first <= out[i - 1].first + out[i - 1].len) std::abort();
        if (content_range(out[i], len).empty()) std::abort();
    }
    return 0;
}
