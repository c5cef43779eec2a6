// Storage for a primitive that a test destroys: zeroed once the primitive is gone, so that a
// write to it after that (a use after free: taking its lock writes into it) shows, without a
// sanitizer.
#pragma once

#include <algorithm>
#include <cstring>
#include <iterator>
#include <new>
#include <utility>

namespace gluon::test {

template <typename T>
struct canary_storage {
    alignas(T) unsigned char bytes[sizeof(T)];
    template <typename... A>
    T* make(A&&... a) {
        return new (bytes) T(std::forward<A>(a)...);
    }
    T* get() { return std::launder(reinterpret_cast<T*>(bytes)); }
    void destroy() {
        get()->~T();
        std::memset(bytes, 0, sizeof bytes);
    }
    bool untouched() const {
        return std::all_of(std::begin(bytes), std::end(bytes), [](unsigned char c) { return c == 0; });
    }
};

}  // namespace gluon::test
