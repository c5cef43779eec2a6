// API misuse (a blocking call outside a fiber, joining twice, destroying a locked mutex, ...):
// a debug build prints what went wrong and aborts; a release build logs it (rate-limited) and the
// caller returns the documented error. Never undefined behaviour.
#pragma once

#include <string_view>

namespace gluon::detail {

/// Reports misuse `what`. Aborts in debug builds (NDEBUG unset) or when GLUON_MISUSE_ABORT=1.
void report_misuse(std::string_view what) noexcept;

}  // namespace gluon::detail
