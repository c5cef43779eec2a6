// The WebSocket frame codec (RFC 6455 5.2): frame heads in and out, and masking. No I/O and no
// state, so that the fuzzer and the tests drive it directly. Private to the http module.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gluon::http::ws {

enum op : uint8_t { op_continuation = 0, op_text = 1, op_binary = 2, op_close = 8, op_ping = 9, op_pong = 10 };

inline bool is_control(uint8_t opcode) noexcept { return opcode & 0x8; }

/// The largest frame head: 2 bytes, an 8-byte length, a 4-byte masking key.
inline constexpr size_t k_max_head = 14;
inline constexpr size_t k_max_control_payload = 125;

struct frame_head {
    bool fin = false;
    uint8_t opcode = 0;
    bool masked = false;
    uint32_t mask = 0;     // the key's four bytes as they came, in memory order
    uint64_t length = 0;   // payload bytes
    size_t head_bytes = 0; // how many bytes the head took
};

struct decode_result {
    enum kind : uint8_t { complete, incomplete, invalid } state = incomplete;
    uint16_t close_code = 0;  // for invalid: 1002 (protocol error)
    const char* why = "";
};

/// Decodes the frame head at the start of [p, p+n). `from_client`: the frame was sent by a
/// client, so it must be masked (a server's must not be). Rejects reserved bits (no extension
/// is ever negotiated), unknown opcodes, fragmented or long control frames and lengths with the
/// top bit set.
decode_result decode_head(const uint8_t* p, size_t n, bool from_client, frame_head& out) noexcept;

/// Writes a frame head into out (k_max_head bytes of room); returns its length. `mask` is used
/// when `masked`.
size_t encode_head(uint8_t* out, uint8_t opcode, bool fin, uint64_t length, bool masked,
                   uint32_t mask) noexcept;

/// XORs n bytes with the key, as bytes `offset`.. of a frame's payload (so a payload can be
/// unmasked in pieces). dst may equal src.
void mask_copy(uint8_t* dst, const uint8_t* src, size_t n, uint32_t mask, uint64_t offset) noexcept;

}  // namespace gluon::http::ws
