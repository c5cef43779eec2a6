// Header hygiene for both proxies: which fields stop at this hop, and the heads sent each way.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "gluon/http/message.h"
#include "gluon/http/proxy.h"

namespace gluon::http::detail {

/// The fields of `all` that only concern one hop: the fixed ones (RFC 9110 7.6.1, and Proxy-*)
/// and those the message's Connection fields name (collected once, when constructed).
class hop_fields {
public:
    explicit hop_fields(std::span<const header> all) noexcept;
    bool contains(std::string_view name) const noexcept;
    /// Whether a field not among the fixed ones was named by Connection.
    bool named(std::string_view name) const noexcept;

private:
    static constexpr size_t k_max_named = 8;
    std::span<const header> all_;
    std::string_view named_[k_max_named];
    size_t count_ = 0;
    bool overflow_ = false;  // more names than fit: named() scans the Connection fields again
};

/// How the request's body goes upstream.
enum class upstream_body : uint8_t { none, length, chunked };

struct request_line {
    std::string_view target;  // origin-form
    std::string_view host;    // the Host field to send
};

/// Appends the request head for the upstream (blank line included) to `out`.
void append_request_head(std::string& out, request& req, const request_line& line,
                         upstream_body body, const proxy_common_options& o);

/// Appends the response's end-to-end fields as "Name: value\r\n" lines (for
/// response::header_lines: the parser has already refused CR, LF and NUL in them).
void append_response_fields(std::string& out, const response_head& h, const proxy_common_options& o);

}  // namespace gluon::http::detail
