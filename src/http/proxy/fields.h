// Header hygiene for both proxies: which fields stop at this hop, and the heads sent each way.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "gluon/http/message.h"
#include "gluon/http/proxy.h"

namespace gluon::http::detail {

/// The fields of `all` that only concern one hop: the fixed ones (RFC 9110 7.6.1, and Proxy-*)
/// and those the message's Connection fields name.
class hop_fields {
public:
    explicit hop_fields(std::span<const header> all) noexcept : all_(all) {}
    bool contains(std::string_view name) const noexcept;

private:
    std::span<const header> all_;
};

/// How the request's body goes upstream.
enum class upstream_body : uint8_t { none, length, chunked };

struct request_line {
    std::string_view target;  // origin-form
    std::string_view host;    // the Host field to send
};

/// Appends the request head for the upstream (blank line included) to `out`.
void append_request_head(std::string& out, const request& req, const request_line& line,
                         upstream_body body, const proxy_common_options& o);

/// Appends the response's end-to-end fields as "Name: value\r\n" lines (for
/// response::header_lines: the parser has already refused CR, LF and NUL in them).
void append_response_fields(std::string& out, const response_head& h, const proxy_common_options& o);

}  // namespace gluon::http::detail
