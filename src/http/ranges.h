// Range requests of static files (RFC 9110 section 14): the "bytes" ranges of a Range field,
// and the multipart/byteranges body that carries several of them. Private to src/http.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gluon::http::detail {

struct byte_range {
    uint64_t first = 0;
    uint64_t len = 0;
};

/// What a Range field asks of a representation.
enum class range_answer {
    whole,          // serve it all (no field, another unit, a malformed or overlong one: RFC 9110
                    // lets a server ignore Range)
    unsatisfiable,  // 416: no range overlaps it
    parts,          // 206 with the ranges given
};

/// The most ranges a field may list before it is ignored (the representation is sent whole):
/// many small or overlapping ranges are a known way to make a server work hard for little.
constexpr size_t k_max_ranges = 32;

/// Parses "bytes=" ranges over a representation of `size` bytes into `out`, sorted by offset,
/// those beyond the end dropped and overlapping or adjacent ones merged.
range_answer parse_ranges(std::string_view field, uint64_t size, std::vector<byte_range>& out);

/// "bytes FIRST-LAST/SIZE" for Content-Range.
std::string content_range(const byte_range& r, uint64_t size);

/// A multipart/byteranges body: for each range, a boundary line, its Content-Type and
/// Content-Range and its bytes (read by part(range, out), which appends them), then the closing
/// boundary. `boundary` is the one given in the response's Content-Type.
template <typename ReadPart>
bool multipart_body(const std::vector<byte_range>& ranges, uint64_t size, std::string_view type,
                    std::string_view boundary, std::string& out, ReadPart part) {
    for (const byte_range& r : ranges) {
        out.append("\r\n--").append(boundary).append("\r\nContent-Type: ").append(type);
        out.append("\r\nContent-Range: ").append(content_range(r, size)).append("\r\n\r\n");
        if (!part(r, out)) return false;
    }
    out.append("\r\n--").append(boundary).append("--\r\n");
    return true;
}

/// A boundary unlikely to occur in any file: 24 random hexadecimal digits.
std::string new_boundary();

}  // namespace gluon::http::detail
