#include "websocket_handshake.h"

#include <cstring>

#include "chars.h"
#include "gluon/http/parser.h"
#include "lists.h"
#include "gluon/sys/ops.h"

namespace gluon::http::ws {

namespace {

uint32_t rol(uint32_t v, int n) noexcept { return (v << n) | (v >> (32 - n)); }

void sha1_block(uint32_t h[5], const uint8_t* p) noexcept {
    uint32_t w[80];
    for (int i = 0; i < 16; ++i)
        w[i] = (uint32_t{p[4 * i]} << 24) | (uint32_t{p[4 * i + 1]} << 16) | (uint32_t{p[4 * i + 2]} << 8) | p[4 * i + 3];
    for (int i = 16; i < 80; ++i) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; ++i) {
        uint32_t f, k;
        if (i < 20) f = (b & c) | (~b & d), k = 0x5a827999;
        else if (i < 40) f = b ^ c ^ d, k = 0x6ed9eba1;
        else if (i < 60) f = (b & c) | (b & d) | (c & d), k = 0x8f1bbcdc;
        else f = b ^ c ^ d, k = 0xca62c1d6;
        uint32_t t = rol(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rol(b, 30);
        b = a;
        a = t;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
}

constexpr char k_b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr std::string_view k_guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

bool is_b64(char c) noexcept {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

}  // namespace

void sha1(std::string_view data, uint8_t out[20]) noexcept {
    uint32_t h[5] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
    const auto* p = reinterpret_cast<const uint8_t*>(data.data());
    size_t n = data.size();
    size_t i = 0;
    for (; i + 64 <= n; i += 64) sha1_block(h, p + i);
    uint8_t tail[128] = {};
    size_t rest = n - i;
    std::memcpy(tail, p + i, rest);
    tail[rest] = 0x80;
    size_t blocks = rest + 9 <= 64 ? 1 : 2;
    uint64_t bits = uint64_t{n} * 8;
    for (int j = 0; j < 8; ++j) tail[blocks * 64 - 1 - j] = static_cast<uint8_t>(bits >> (8 * j));
    for (size_t b = 0; b < blocks; ++b) sha1_block(h, tail + 64 * b);
    for (int j = 0; j < 5; ++j)
        for (int k = 0; k < 4; ++k) out[4 * j + k] = static_cast<uint8_t>(h[j] >> (24 - 8 * k));
}

std::string base64_encode(const uint8_t* p, size_t n) {
    std::string s;
    s.reserve((n + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t{p[i]} << 16) | (uint32_t{p[i + 1]} << 8) | p[i + 2];
        for (int k = 18; k >= 0; k -= 6) s += k_b64[(v >> k) & 63];
    }
    if (n - i == 1) {
        uint32_t v = uint32_t{p[i]} << 16;
        s += k_b64[(v >> 18) & 63];
        s += k_b64[(v >> 12) & 63];
        s += "==";
    } else if (n - i == 2) {
        uint32_t v = (uint32_t{p[i]} << 16) | (uint32_t{p[i + 1]} << 8);
        s += k_b64[(v >> 18) & 63];
        s += k_b64[(v >> 12) & 63];
        s += k_b64[(v >> 6) & 63];
        s += '=';
    }
    return s;
}

int base64_decoded_length(std::string_view s) noexcept {
    if (s.empty() || s.size() % 4) return -1;
    size_t pad = s.back() == '=' ? (s[s.size() - 2] == '=' ? 2 : 1) : 0;
    for (size_t i = 0; i < s.size() - pad; ++i)
        if (!is_b64(s[i])) return -1;
    return static_cast<int>(s.size() / 4 * 3 - pad);
}

std::string accept_value(std::string_view key) {
    std::string buf(key);
    buf += k_guid;
    uint8_t d[20];
    sha1(buf, d);
    return base64_encode(d, sizeof d);
}

std::string new_key() {
    uint8_t k[16];
    random_bytes(k, sizeof k);
    return base64_encode(k, sizeof k);
}

bool has_token(std::string_view value, std::string_view token) noexcept {
    return !detail::for_each_element(value, [token](std::string_view t) { return !iequals(t, token); });
}

bool has_exact_token(std::string_view value, std::string_view token) noexcept {
    return !detail::for_each_element(value, [token](std::string_view t) { return t != token; });
}

bool fields_have_token(std::span<const header> fields, std::string_view name, std::string_view token,
                       bool exact) noexcept {
    for (const header& f : fields)
        if (iequals(f.name, name) && (exact ? has_exact_token(f.value, token) : has_token(f.value, token)))
            return true;
    return false;
}

void random_bytes(void* out, size_t n) noexcept {
    // getrandom(2) in 256-byte batches: a client masks every frame with a fresh key, and a
    // system call per frame would cost more than the frame.
    thread_local uint8_t pool[256];
    thread_local size_t left = 0;
    auto* o = static_cast<uint8_t*>(out);
    while (n) {
        if (!left) {
            long r = sys::getrandom(pool, sizeof pool, 0);
            if (r <= 0) {  // cannot happen after boot; never hand out a predictable zero key
                uint64_t x = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(&left)) ^ 0x9e3779b97f4a7c15ull;
                for (auto& b : pool) x = x * 6364136223846793005ull + 1442695040888963407ull, b = static_cast<uint8_t>(x >> 33);
                r = sizeof pool;
            }
            left = static_cast<size_t>(r);
        }
        size_t k = n < left ? n : left;
        std::memcpy(o, pool + (sizeof pool - left), k);
        left -= k;
        o += k;
        n -= k;
    }
}

uint32_t random_mask() noexcept {
    uint32_t m;
    random_bytes(&m, sizeof m);
    return m;
}

}  // namespace gluon::http::ws
