#include "websocket_frame.h"

#include <cstring>

namespace gluon::http::ws {

decode_result decode_head(const uint8_t* p, size_t n, bool from_client, frame_head& out) noexcept {
    auto bad = [](const char* why) { return decode_result{decode_result::invalid, 1002, why}; };
    if (n < 2) return {};
    const uint8_t b0 = p[0], b1 = p[1];
    if (b0 & 0x70) return bad("reserved bits set");
    out.fin = b0 & 0x80;
    out.opcode = b0 & 0x0f;
    switch (out.opcode) {
    case op_continuation: case op_text: case op_binary: case op_close: case op_ping: case op_pong: break;
    default: return bad("reserved opcode");
    }
    out.masked = b1 & 0x80;
    if (out.masked != from_client) return bad(from_client ? "unmasked client frame" : "masked server frame");
    uint64_t len = b1 & 0x7f;
    size_t at = 2;
    if (is_control(out.opcode)) {
        if (!out.fin) return bad("fragmented control frame");
        if (len > k_max_control_payload) return bad("control frame over 125 bytes");
    }
    if (len == 126) {
        if (n < 4) return {};
        len = (uint64_t{p[2]} << 8) | p[3];
        at = 4;
    } else if (len == 127) {
        if (n < 10) return {};
        len = 0;
        for (int i = 0; i < 8; ++i) len = (len << 8) | p[2 + i];
        if (len >> 63) return bad("length with the top bit set");
        at = 10;
    }
    if (out.masked) {
        if (n < at + 4) return {};
        std::memcpy(&out.mask, p + at, 4);
        at += 4;
    } else {
        out.mask = 0;
    }
    out.length = len;
    out.head_bytes = at;
    return {decode_result::complete, 0, ""};
}

size_t encode_head(uint8_t* out, uint8_t opcode, bool fin, uint64_t length, bool masked,
                   uint32_t mask) noexcept {
    out[0] = static_cast<uint8_t>((fin ? 0x80 : 0) | opcode);
    const uint8_t m = masked ? 0x80 : 0;
    size_t at;
    if (length < 126) {
        out[1] = static_cast<uint8_t>(m | length);
        at = 2;
    } else if (length <= 0xffff) {
        out[1] = m | 126;
        out[2] = static_cast<uint8_t>(length >> 8);
        out[3] = static_cast<uint8_t>(length);
        at = 4;
    } else {
        out[1] = m | 127;
        for (int i = 0; i < 8; ++i) out[2 + i] = static_cast<uint8_t>(length >> (56 - 8 * i));
        at = 10;
    }
    if (masked) {
        std::memcpy(out + at, &mask, 4);
        at += 4;
    }
    return at;
}

void mask_copy(uint8_t* dst, const uint8_t* src, size_t n, uint32_t mask, uint64_t offset) noexcept {
    // Rotate the key so that byte 0 of this piece lines up with key byte offset % 4 (the key is
    // in memory order, so on a little-endian machine byte i is bits 8i..8i+7).
    const unsigned shift = static_cast<unsigned>(offset & 3) * 8;
    uint32_t k = shift ? (mask >> shift) | (mask << (32 - shift)) : mask;
    uint64_t k8 = (uint64_t{k} << 32) | k;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        std::memcpy(&v, src + i, 8);
        v ^= k8;
        std::memcpy(dst + i, &v, 8);
    }
    for (; i < n; ++i) dst[i] = src[i] ^ static_cast<uint8_t>(k8 >> (8 * (i & 3)));
}

}  // namespace gluon::http::ws
