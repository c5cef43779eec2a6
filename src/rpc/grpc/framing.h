// gRPC's wire details over HTTP/2: the 5-byte message prefix, grpc-timeout values and the
// percent-encoding of grpc-message.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "gluon/common/clock.h"

namespace gluon::rpc::grpc::detail {

/// Appends a message with its prefix (uncompressed).
void append_message(std::string& out, std::string_view msg);

/// Takes whole messages out of a byte stream that arrives in pieces.
class message_reader {
public:
    enum class step { message, more, bad, compressed, too_large };
    explicit message_reader(size_t max) noexcept : max_(max) {}
    /// Adds bytes received.
    void feed(std::string_view bytes) { buf_.append(bytes); }
    /// The next whole message into msg, or what stops it.
    step next(std::string& msg);
    /// Bytes received that are not a whole message yet.
    size_t pending() const noexcept { return buf_.size() - pos_; }

private:
    std::string buf_;
    size_t pos_ = 0;
    size_t max_;
};

/// A grpc-timeout value ("100m", "5S", ...) as a duration; false if malformed.
bool parse_timeout(std::string_view v, duration& out) noexcept;
/// A duration as a grpc-timeout value (at most 8 digits, the finest unit that fits).
std::string format_timeout(duration d);

/// grpc-message's encoding: bytes outside printable ASCII and '%' as %XX.
std::string percent_encode(std::string_view s);
std::string percent_decode(std::string_view s);

}  // namespace gluon::rpc::grpc::detail
