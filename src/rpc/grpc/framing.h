// gRPC's wire details over HTTP/2: the 5-byte message prefix, grpc-timeout values and the
// percent-encoding of grpc-message.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "gluon/common/clock.h"

namespace gluon::rpc::grpc::detail {

/// Appends a message with its prefix (uncompressed).
void append_message(std::string& out, std::string_view msg);
/// Writes the 5-byte prefix of an uncompressed message of n bytes at p.
void put_prefix(char* p, size_t n) noexcept;

/// Takes whole messages out of a byte stream that arrives in pieces. The bytes are read straight
/// into the reader's buffer (space(), then filled()), and a message is handed out as a view of
/// it, valid until the reader is next changed.
class message_reader {
public:
    enum class step { message, more, bad, compressed, too_large };
    explicit message_reader(size_t max) noexcept : max_(max) {}
    /// Room for at least n more bytes at the end of the buffer.
    char* space(size_t n);
    /// n bytes were written at space().
    void filled(size_t n) noexcept { end_ += n; }
    /// Adds bytes received elsewhere.
    void feed(std::string_view bytes);
    /// The next whole message as a view, or what stops it.
    step next(std::string_view& msg);
    /// The same, copied into msg.
    step next(std::string& msg);
    /// Bytes received that are not a whole message yet.
    size_t pending() const noexcept { return end_ - beg_; }

private:
    std::unique_ptr<char[]> buf_;
    size_t cap_ = 0, beg_ = 0, end_ = 0;
    size_t max_;
};

/// A grpc-timeout value ("100m", "5S", ...) as a duration (forever past what nanoseconds
/// hold); false if malformed.
bool parse_timeout(std::string_view v, duration& out) noexcept;
/// A duration as a grpc-timeout value (at most 8 digits, the finest unit that fits).
std::string format_timeout(duration d);

/// grpc-message's encoding: bytes outside printable ASCII and '%' as %XX.
std::string percent_encode(std::string_view s);
std::string percent_decode(std::string_view s);

}  // namespace gluon::rpc::grpc::detail
