// shmipc control messages on the socket: an 8-byte big-endian header (total length, magic
// 0x7758, version, type) and the few bodies the protocol has. Pure functions over bytes, so the
// decoder can be fuzzed alone (tests/ipc/fuzz/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "gluon/common/result.h"

namespace gluon::ipc::wire {

inline constexpr uint16_t k_magic = 0x7758;
inline constexpr size_t k_header_size = 8;
/// The longest shared-memory path either side accepts (Linux's PATH_MAX).
inline constexpr size_t k_max_path = 4096;

enum class type : uint8_t {
    share_memory_by_file_path = 0,
    polling = 1,
    stream_close = 2,
    fallback_data = 3,
    exchange_proto_version = 4,
    share_memory_by_memfd = 5,
    ack_share_memory = 6,
    ack_ready_recv_fd = 7,
    hot_restart = 8,
    hot_restart_ack = 9,
};

struct header {
    uint32_t length;  // total, header included
    uint8_t version;
    type kind;
};

inline void put_u16(uint8_t* p, uint16_t v) noexcept {
    p[0] = uint8_t(v >> 8);
    p[1] = uint8_t(v);
}
inline void put_u32(uint8_t* p, uint32_t v) noexcept {
    for (int i = 0; i < 4; ++i) p[i] = uint8_t(v >> (24 - 8 * i));
}
inline void put_u64(uint8_t* p, uint64_t v) noexcept {
    for (int i = 0; i < 8; ++i) p[i] = uint8_t(v >> (56 - 8 * i));
}
inline uint16_t get_u16(const uint8_t* p) noexcept { return uint16_t(p[0] << 8 | p[1]); }
inline uint32_t get_u32(const uint8_t* p) noexcept {
    return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}
inline uint64_t get_u64(const uint8_t* p) noexcept { return uint64_t(get_u32(p)) << 32 | get_u32(p + 4); }

/// Writes a header announcing `length` total bytes.
inline void encode_header(uint8_t* out, uint32_t length, uint8_t version, type t) noexcept {
    put_u32(out, length);
    put_u16(out + 4, k_magic);
    out[6] = version;
    out[7] = static_cast<uint8_t>(t);
}

/// Decodes and checks a header: the magic, a non-zero version, a known type, and a total length
/// that fits the type (at most max_length for the variable ones). Errors: ipc::errc::bad_header,
/// ipc::errc::bad_message, ipc::errc::message_too_large.
result<header> decode_header(const uint8_t* p, uint32_t max_length) noexcept;

/// The two paths of ShareMemoryByFilePath / ShareMemoryByMemfd.
struct share_memory_paths {
    std::string queue_path;
    std::string buffer_path;
};
/// Decodes the body (after the header) into out. Errors: ipc::errc::bad_message (lengths that do
/// not add up, an empty path, a NUL byte in one).
result<void> decode_paths(std::span<const uint8_t> body, share_memory_paths& out);
/// A whole message with the two paths. Errors: EINVAL (a path empty or longer than k_max_path).
result<std::string> encode_paths(type t, uint8_t version, std::string_view queue_path,
                                 std::string_view buffer_path);

/// FallbackData's body: stream id, status, then the payload.
struct fallback {
    uint32_t stream_id;
    uint32_t status;
    std::span<const uint8_t> payload;
};
/// Errors: ipc::errc::bad_message (shorter than 8 bytes).
result<fallback> decode_fallback(std::span<const uint8_t> body) noexcept;
/// The 16-byte prefix of a FallbackData message carrying n payload bytes.
void encode_fallback_prefix(uint8_t* out, uint8_t version, uint32_t stream_id, size_t n) noexcept;

/// One whole control message found at the front of a buffer.
struct message {
    header head;
    std::span<const uint8_t> body;
};
/// Finds the first message in buf: its size (header + body), 0 if buf does not hold all of it
/// yet. Errors: those of decode_header.
result<size_t> next_message(std::span<const uint8_t> buf, uint32_t max_length, message& out) noexcept;

}  // namespace gluon::ipc::wire
