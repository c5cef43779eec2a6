// Fiber-local storage: one T per fiber, created on first use, destroyed when the fiber ends.
// Outside a vCPU it behaves like thread_local for the calling thread.
//
// At the end, the fiber's values are destroyed one at a time (in the order of their keys, for
// fiber_locals that never gave a key back the order they were made), as pthread keys are: a
// destructor sees the fiber's values not destroyed yet, and one that uses a fiber_local whose
// value is gone already gets a new value, destroyed in turn (up to 4 rounds).
#pragma once

#include <cstddef>

namespace gluon {

namespace detail {
/// Registers a key whose values are destroyed with dtor: a key of the same dtor that was
/// released, or a new one. A key names a slot and the slot's generation: a value a fiber set
/// through a released key is never seen through a later key of the same slot (it is destroyed
/// when the fiber first uses the slot's new key, or when the fiber ends).
size_t fls_new_key(void (*dtor)(void*)) noexcept;
/// Gives a key back for reuse. The values fibers hold for it are not destroyed now: see
/// fls_new_key.
void fls_release_key(size_t key) noexcept;
/// The calling fiber's (or thread's) slot for key; nullptr until set.
void*& fls_slot(size_t key) noexcept;
}  // namespace detail

template <typename T>
class fiber_local {
public:
    fiber_local() noexcept : key_(detail::fls_new_key([](void* p) { delete static_cast<T*>(p); })) {}
    fiber_local(const fiber_local&) = delete;
    fiber_local& operator=(const fiber_local&) = delete;
    /// Its key goes to the next fiber_local<T>: a program that makes and drops them in a loop
    /// uses a bounded number of keys. A fiber's value is destroyed when the fiber ends, or when
    /// it first uses the fiber_local that got the key; no fiber sees another fiber_local's value.
    ~fiber_local() { detail::fls_release_key(key_); }

    /// The calling fiber's value, default-constructed on first use. T's constructor may use
    /// fiber-locals itself.
    T& get() {
        if (void* v = detail::fls_slot(key_)) return *static_cast<T*>(v);
        T* made = new T();
        // The slot is looked up again: T() may have used fiber-locals past the end of the
        // fiber's slots, which grow (move) then, so a reference taken before it would dangle.
        detail::fls_slot(key_) = made;
        return *made;
    }
    T& operator*() { return get(); }
    T* operator->() { return &get(); }

private:
    size_t key_;
};

}  // namespace gluon
