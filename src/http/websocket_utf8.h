// Incremental UTF-8 validation (RFC 3629: no overlong forms, no surrogates, nothing above
// U+10FFFF) for text messages that arrive in fragments. Fails at the first byte that cannot
// begin or continue a valid sequence, as RFC 6455 8.1 asks. Private to the http module.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gluon::http::ws {

class utf8_validator {
public:
    /// Checks the next n bytes. False at the first invalid byte (the state is then undefined).
    bool feed(const uint8_t* p, size_t n) noexcept;
    /// True if the bytes fed so far end on a character boundary.
    bool complete() const noexcept { return need_ == 0; }
    void reset() noexcept { need_ = 0; }

private:
    uint8_t need_ = 0;          // continuation bytes still expected
    uint8_t lo_ = 0x80, hi_ = 0xbf;  // the range of the next continuation byte
};

}  // namespace gluon::http::ws
