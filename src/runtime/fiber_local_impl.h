// Fiber-local storage internals. Private to the runtime.
#pragma once

namespace gluon::detail {
struct fiber_impl;
/// Destroys every fiber-local value of f (at fiber exit).
void fls_destroy(fiber_impl* f) noexcept;
}  // namespace gluon::detail
