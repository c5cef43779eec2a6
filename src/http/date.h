// HTTP dates (RFC 9110 5.6.7): IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") is sent; the
// obsolete forms are accepted too.
#pragma once

#include <time.h>

#include <string_view>

namespace gluon::http::detail {

inline constexpr size_t k_http_date_len = 29;

/// The date now, formatted once a second per thread; valid until the thread's next call.
std::string_view http_date_now() noexcept;

/// Formats t into out (k_http_date_len bytes, no terminator).
void format_http_date(time_t t, char* out) noexcept;

/// Parses an HTTP-date in any of the three forms a recipient must accept (RFC 9110 5.6.7):
/// IMF-fixdate, RFC 850's and asctime's; -1 if it is none of them.
time_t parse_http_date(std::string_view s) noexcept;

}  // namespace gluon::http::detail
