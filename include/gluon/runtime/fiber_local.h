// Fiber-local storage: one T per fiber, created on first use, destroyed when the fiber ends.
// Outside a vCPU it behaves like thread_local for the calling thread.
#pragma once

#include <cstddef>

namespace gluon {

namespace detail {
/// Registers a new key whose values are destroyed with dtor. Keys are never reused.
size_t fls_new_key(void (*dtor)(void*)) noexcept;
/// The calling fiber's (or thread's) slot for key; nullptr until set.
void*& fls_slot(size_t key) noexcept;
}  // namespace detail

template <typename T>
class fiber_local {
public:
    fiber_local() noexcept : key_(detail::fls_new_key([](void* p) { delete static_cast<T*>(p); })) {}
    fiber_local(const fiber_local&) = delete;
    fiber_local& operator=(const fiber_local&) = delete;

    /// The calling fiber's value, default-constructed on first use.
    T& get() {
        void*& slot = detail::fls_slot(key_);
        if (!slot) slot = new T();
        return *static_cast<T*>(slot);
    }
    T& operator*() { return get(); }
    T* operator->() { return &get(); }

private:
    size_t key_;
};

}  // namespace gluon
