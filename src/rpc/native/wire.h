// The native RPC's frame header (docs/adr/0021-rpc-wire-format.md): 32 bytes, little-endian.
//
//   0  u32 length      payload bytes after the header
//   4  u8  version     1
//   5  u8  kind        request 1, response 2, cancel 3
//   6  u16 flags       0 (reserved)
//   8  u16 service
//  10  u16 method
//  12  u32 schema      request: the method's schema hash; response: the status
//  16  u64 id          the caller's request id, echoed in the response
//  24  u64 timeout_us  request: microseconds left until the caller's deadline, 0 = none
#pragma once

#include "gluon/rpc/native/error.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <system_error>

namespace gluon::rpc::wire {

inline constexpr size_t k_header_size = 32;
inline constexpr uint8_t k_version = 1;

enum class kind : uint8_t { request = 1, response = 2, cancel = 3 };

struct header {
    uint32_t length = 0;
    uint8_t version = k_version;
    kind type = kind::request;
    uint16_t flags = 0;
    uint16_t service = 0;
    uint16_t method = 0;
    uint32_t schema = 0; // a response's status
    uint64_t id = 0;
    uint64_t timeout_us = 0;
};
static_assert(sizeof(header) == k_header_size);

inline void put(const header& h, uint8_t* out) noexcept {
    std::memcpy(out, &h, k_header_size);
}
inline header get(const uint8_t* in) noexcept {
    header h;
    std::memcpy(&h, in, k_header_size);
    return h;
}

/// Checks a header off the wire. Errors: errc::malformed_frame (a version, kind or flags this
/// side does not know, a cancel with a payload), errc::frame_too_large (length over max).
std::error_code check(const header& h, size_t max_frame) noexcept;

/// A response's status field: 0 success, an rpc::errc value, or 0x10000 | errno for a handler
/// that failed with an errno-style error.
uint32_t status_of(const std::error_code& e) noexcept;
/// Any status but 0 is an error: one this side does not know is errc::handler_failed.
std::error_code error_of_status(uint32_t status) noexcept;

} // namespace gluon::rpc::wire
