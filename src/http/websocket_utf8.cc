#include "websocket_utf8.h"

#include <cstring>

namespace gluon::http::ws {

bool utf8_validator::feed(const uint8_t* p, size_t n) noexcept {
    size_t i = 0;
    while (i < n) {
        if (need_ == 0) {
            // ASCII runs, 8 bytes at a time: most text is mostly ASCII.
            while (i + 8 <= n) {
                uint64_t v;
                std::memcpy(&v, p + i, 8);
                if (v & 0x8080808080808080ull) break;
                i += 8;
            }
            if (i == n) break;
            const uint8_t b = p[i++];
            if (b < 0x80) continue;
            lo_ = 0x80;
            hi_ = 0xbf;
            if (b >= 0xc2 && b <= 0xdf) {
                need_ = 1;
            } else if (b >= 0xe0 && b <= 0xef) {
                need_ = 2;
                if (b == 0xe0) lo_ = 0xa0;       // overlong
                else if (b == 0xed) hi_ = 0x9f;  // surrogates
            } else if (b >= 0xf0 && b <= 0xf4) {
                need_ = 3;
                if (b == 0xf0) lo_ = 0x90;       // overlong
                else if (b == 0xf4) hi_ = 0x8f;  // above U+10FFFF
            } else {
                return false;  // a continuation byte, C0/C1 (overlong), or F5..FF
            }
            continue;
        }
        const uint8_t b = p[i++];
        if (b < lo_ || b > hi_) return false;
        lo_ = 0x80;
        hi_ = 0xbf;
        --need_;
    }
    return true;
}

}  // namespace gluon::http::ws
