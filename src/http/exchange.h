// What a request and its response reach their connection through: an HTTP/1.1 connection, or
// one stream of an HTTP/2 connection. The handler API is the same over both.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "gluon/common/result.h"
#include "gluon/http/message.h"
#include "gluon/net/byte_stream.h"

namespace gluon::http::detail {

/// The peer's IP address as text, looked up and formatted once per connection.
class peer_ip_cache {
public:
    /// See request::client_ip. Errors: none (empty when there is no IP address).
    std::string_view get(net::byte_stream& s);

private:
    std::string text_;
    bool known_ = false;
};

class exchange {
public:
    /// The next piece of the request body (0: it has ended), waiting at most min(timeout,
    /// body_timeout) for it. Errors: see request::read_body.
    virtual result<size_t> read_body(void* buf, size_t n, duration timeout) = 0;
    /// The connection's stream.
    virtual net::byte_stream& stream() noexcept = 0;
    /// A piece of a streamed response body; sends the head first if it has not gone yet.
    virtual result<void> write_body(response& r, std::string_view data) = 0;
    /// Ends a streamed body (its head first if nothing was written), with the trailers.
    /// `short_body`: fewer bytes were written than declared.
    virtual result<void> finish_body(response& r, bool short_body) = 0;
    /// Writes a 101 answer's head as given and hands the connection over; returns the bytes
    /// already received after the request. Errors: the stream's; EPROTONOSUPPORT where the
    /// protocol has no upgrade (HTTP/2).
    virtual result<std::string_view> upgrade(response& r, std::string_view raw_head) = 0;
    /// Waits until the client abandons the request. Errors: ETIMEDOUT, ECANCELED,
    /// EOPNOTSUPP (HTTP/1.1: no way to tell without reading what may follow).
    virtual result<void> wait_abandoned(duration timeout) = 0;
    /// See request::abandoned.
    virtual bool abandoned() const noexcept = 0;
    /// See request::interrupt_when_abandoned. Errors: EOPNOTSUPP (HTTP/1.1).
    virtual result<void> interrupt_when_abandoned(deadline_t at) = 0;
    /// See request::client_ip.
    virtual std::string_view client_ip() = 0;

protected:
    ~exchange() = default;
};

}  // namespace gluon::http::detail
