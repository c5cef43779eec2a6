// The chunked transfer coding (RFC 9112 7.1), decoded in place.
#include <cstring>

#include "chars.h"
#include "gluon/http/parser.h"

namespace gluon::http {

namespace {

/// A control byte other than HTAB, or DEL: never allowed in a chunk extension or trailer line.
bool bad_line_byte(char c) noexcept { return !detail::is_vchar_or_sp(c) && c != '\t'; }

}  // namespace

chunked_decoder::step chunked_decoder::next(std::string_view in) noexcept {
    step st;
    auto fail = [&](const char* why) {
        state_ = state::failed;
        st.error = true;
        st.why = why;
        return st;
    };
    size_t pos = 0;
    for (;;) {
        std::string_view rest = in.substr(pos);
        switch (state_) {
            case state::failed:
                return fail("chunked body already failed");
            case state::done:
                st.done = true;
                st.consumed = pos;
                return st;
            case state::size: {
                // chunk-size [ chunk-ext ] CRLF, with chunk-ext = *( BWS ";" BWS name [ BWS "=" BWS value ] )
                size_t look = rest.size() < max_line_ ? rest.size() : max_line_;
                const void* lf = std::memchr(rest.data(), '\n', look);
                if (!lf) {
                    if (rest.size() >= max_line_) return fail("chunk size line too long");
                    st.consumed = pos;
                    return st;
                }
                size_t eol = static_cast<const char*>(lf) - rest.data();
                if (eol == 0 || rest[eol - 1] != '\r') return fail("bare LF in chunk size line");
                size_t i = 0;
                uint64_t size = 0;
                while (i < eol - 1 && detail::is_hex(rest[i])) {
                    if (size >> 60) return fail("chunk size overflows");
                    size = (size << 4) | static_cast<uint64_t>(detail::hex_value(rest[i]));
                    ++i;
                }
                if (i == 0) return fail("missing chunk size");
                size_t j = i;
                while (j < eol - 1 && (rest[j] == ' ' || rest[j] == '\t')) ++j;
                if (j < eol - 1) {
                    if (rest[j] != ';') return fail("invalid chunk size");
                    for (size_t k = j; k < eol - 1; ++k)
                        if (bad_line_byte(rest[k])) return fail("invalid byte in chunk extension");
                } else if (j != i) {
                    return fail("whitespace after chunk size");
                }
                pos += eol + 1;
                if (size == 0) {
                    state_ = state::trailer;
                } else {
                    remaining_ = size;
                    state_ = state::data;
                }
                break;
            }
            case state::data: {
                if (rest.empty()) {
                    st.consumed = pos;
                    return st;
                }
                size_t take = rest.size() < remaining_ ? rest.size() : static_cast<size_t>(remaining_);
                remaining_ -= take;
                total_ += take;
                if (remaining_ == 0) state_ = state::data_crlf;
                st.data = rest.substr(0, take);
                st.consumed = pos + take;
                return st;
            }
            case state::data_crlf:
                if (rest.size() < 2) {
                    if (!rest.empty() && rest[0] != '\r') return fail("chunk data not followed by CRLF");
                    st.consumed = pos;
                    return st;
                }
                if (rest[0] != '\r' || rest[1] != '\n') return fail("chunk data not followed by CRLF");
                pos += 2;
                state_ = state::size;
                break;
            case state::trailer: {
                // *( field-line CRLF ) CRLF: the fields are checked and dropped.
                size_t look = rest.size() < max_line_ ? rest.size() : max_line_;
                const void* lf = std::memchr(rest.data(), '\n', look);
                if (!lf) {
                    if (rest.size() >= max_line_) return fail("trailer line too long");
                    st.consumed = pos;
                    return st;
                }
                size_t eol = static_cast<const char*>(lf) - rest.data();
                if (eol == 0 || rest[eol - 1] != '\r') return fail("bare LF in trailer");
                pos += eol + 1;
                if (eol == 1) {
                    state_ = state::done;
                    break;
                }
                trailer_bytes_ += eol + 1;
                if (trailer_bytes_ > max_trailer_) return fail("trailer section too large");
                size_t k = 0;
                while (k < eol - 1 && detail::is_tchar(rest[k])) ++k;
                if (k == 0 || rest[k] != ':') return fail("invalid trailer field");
                for (++k; k < eol - 1; ++k)
                    if (bad_line_byte(rest[k])) return fail("invalid byte in trailer field");
                break;
            }
        }
    }
}

}  // namespace gluon::http
