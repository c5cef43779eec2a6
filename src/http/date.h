// The Date field's value, formatted once a second per thread.
#pragma once

#include <string_view>

namespace gluon::http::detail {

/// "Sun, 06 Nov 1994 08:49:37 GMT" for now (RFC 9110 5.6.7); valid until the thread's next call.
std::string_view http_date_now() noexcept;

}  // namespace gluon::http::detail
