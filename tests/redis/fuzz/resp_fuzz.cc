// libFuzzer target: bytes from a Redis server as the connection decodes them: replies one after
// another until the bytes end or stop being RESP. Each complete reply must have used bytes it
// was given, and a reply decoded from a prefix must decode the same from the whole.
#include <cstddef>
#include <cstdint>

#include "redis/resp.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace gluon::redis;
    const char* p = reinterpret_cast<const char*>(data);
    detail::decode_limits lim;
    lim.max_bulk = 1 << 20;
    lim.max_elements = 1 << 12;
    size_t at = 0;
    while (at < size) {
        reply r;
        size_t used = 0;
        auto st = detail::decode(p + at, size - at, r, used, lim);
        if (st != detail::decode_status::complete) break;
        if (used == 0 || used > size - at) __builtin_trap();
        // The same reply from exactly its own bytes.
        reply again;
        size_t used2 = 0;
        if (detail::decode(p + at, used, again, used2, lim) != detail::decode_status::complete || used2 != used)
            __builtin_trap();
        if (used > 1 && detail::decode(p + at, used - 1, again, used2, lim) == detail::decode_status::complete)
            __builtin_trap();  // one byte short cannot be a whole reply
        at += used;
    }
    return 0;
}
