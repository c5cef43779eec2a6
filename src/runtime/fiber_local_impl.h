// Fiber-local storage internals. Private to the runtime.
#pragma once

#include <cstdint>

namespace gluon::detail {
struct fiber_impl;

/// A fiber's (or thread's) slot: the value, and the generation of the key that set it (a value
/// of an older generation belongs to a released key and is not the current key's).
struct fls_entry {
    void* value;
    uint32_t gen;
};

/// Destroys every fiber-local value of f (at fiber exit).
void fls_destroy(fiber_impl* f) noexcept;
}  // namespace gluon::detail
