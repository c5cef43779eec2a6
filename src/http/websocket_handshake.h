// The WebSocket opening handshake's pieces (RFC 6455 4): the key and its accept value (SHA-1
// and base64, small enough to keep here rather than reach into OpenSSL, which only net/tls may
// use), and field token checks. Private to the http module.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "gluon/http/parser.h"

namespace gluon::http::ws {

/// SHA-1 of data (FIPS 180-4), 20 bytes.
void sha1(std::string_view data, uint8_t out[20]) noexcept;
std::string base64_encode(const uint8_t* p, size_t n);
/// The decoded length of a padded base64 string, or -1 if it is not one.
int base64_decoded_length(std::string_view s) noexcept;

/// Sec-WebSocket-Accept for a Sec-WebSocket-Key.
std::string accept_value(std::string_view key);
/// A new random Sec-WebSocket-Key (16 random bytes, base64).
std::string new_key();
/// True if the comma-separated field value holds `token` (case-insensitive).
bool has_token(std::string_view value, std::string_view token) noexcept;
/// As has_token, case-sensitive: for subprotocol names, which are matched exactly (RFC 7936,
/// updating RFC 6455: only the registry ignores case).
bool has_exact_token(std::string_view value, std::string_view token) noexcept;
/// As has_token (has_exact_token when `exact`), over every field line named `name`
/// (case-insensitive): lines of one name are one comma-separated list (RFC 9110 5.3), so
/// "Connection: keep-alive" then "Connection: Upgrade" holds upgrade.
bool fields_have_token(std::span<const header> fields, std::string_view name, std::string_view token,
                       bool exact = false) noexcept;

/// Random bytes for keys and masks, from getrandom(2) in batches (per thread).
void random_bytes(void* out, size_t n) noexcept;
uint32_t random_mask() noexcept;

}  // namespace gluon::http::ws
