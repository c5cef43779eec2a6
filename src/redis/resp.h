// RESP2 and RESP3 on the wire: commands encoded as arrays of bulk strings, replies decoded from
// a buffer that fills in pieces. Every length and count is checked against limits before it is
// used, so a hostile or broken server costs an error, never a huge allocation or a crash.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "gluon/redis/reply.h"

namespace gluon::redis::detail {

/// Appends one command (*N then $len args) to out.
template <typename Range>
void encode_command(std::string& out, const Range& args) {
    size_t n = 0;
    for (const auto& a : args) (void)a, ++n;
    out += '*';
    out += std::to_string(n);
    out += "\r\n";
    for (std::string_view a : args) {
        out += '$';
        out += std::to_string(a.size());
        out += "\r\n";
        out.append(a.data(), a.size());
        out += "\r\n";
    }
}

struct decode_limits {
    size_t max_bulk = 512u << 20;      // Redis's own limit for a string
    size_t max_elements = 1u << 24;    // per aggregate
    unsigned max_depth = 32;           // nested aggregates
};

enum class decode_status { complete, incomplete, invalid };

/// Finds where a reply ends without decoding it, resumably: each call goes on from where the
/// last one stopped, so a large reply arriving over many reads is scanned once and decoded
/// once, when whole (decoding the buffered prefix again after every read made a reply of a
/// million elements quadratic).
class reply_scanner {
public:
    /// [p, p + n) holds the buffered bytes from the reply's start: the same start as at the
    /// last call, with as many bytes or more. True when a whole reply is there, or bytes that are
    /// not RESP or break lim (decode() with the same limits says which): decode then, and
    /// reset() before the next reply. A header over the limits is reported as soon as it is
    /// read: the bytes it claims are never waited for (nor buffered).
    bool ready(const char* p, size_t n, const decode_limits& lim = {}) noexcept;
    void reset() noexcept {
        pos_ = 0;
        depth_ = 0;
    }

private:
    static constexpr unsigned k_max_depth = 64;  // open aggregates it can follow
    size_t pos_ = 0;                 // scanned up to here: the start of the next element
    unsigned depth_ = 0;             // open aggregates
    int64_t left_[k_max_depth] = {};  // elements still to come in each
};

/// Decodes one reply from the front of [p, p + n). complete: `used` bytes made `out`;
/// incomplete: more bytes are needed (nothing is consumed); invalid: the bytes are not RESP, or
/// break a limit (the connection cannot go on).
decode_status decode(const char* p, size_t n, reply& out, size_t& used, const decode_limits& lim = {});

}  // namespace gluon::redis::detail
