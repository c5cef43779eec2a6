// The request path that routes and static files match: one normal form for the many spellings
// of one path, so that a route cannot be bypassed by a spelling that a file handler would
// decode ("/%61dmin", "//admin", "/x/../admin" are all "/admin").
#pragma once

#include <string>
#include <string_view>

#include "gluon/common/result.h"

namespace gluon::http::detail {

/// raw (an origin-form path, "/...") normalised as RFC 3986 6.2.2 says: percent-encoded
/// unreserved characters decoded, the hex digits of other escapes in upper case, "." and ".."
/// segments removed, and runs of '/' merged into one (as nginx's merge_slashes). Returns raw
/// itself when it is already normal (the common case: no copy), else a view of `storage`. A
/// path that does not start with '/' (the "*" of OPTIONS, a CONNECT authority) is returned as
/// it is. Errors: EINVAL (a ".." above the root).
result<std::string_view> normal_path(std::string_view raw, std::string& storage);

}  // namespace gluon::http::detail
