// Process-wide values made on first use without a function-local static. The C++ runtime guards
// those with a lock whose contended path enters the kernel through libc's syscall(2) wrapper:
// two vCPU threads touching one for the first time at once made gluon call libc (ADR 0013).
// Here two threads that race both compute the value and one result is kept: fine for what
// gluon keeps this way (idempotent probes, tables that live until exit).
#pragma once

#include <atomic>
#include <cstdint>

namespace gluon {

/// An object made by `make()` on first use and never destroyed (it may be used until exit).
/// constinit-able: declare it at namespace scope.
template <typename T>
class lazy_ptr {
public:
    constexpr lazy_ptr() noexcept = default;
    template <typename Make>
    T& get(Make make) {
        T* p = p_.load(std::memory_order_acquire);
        if (p) return *p;
        T* mine = make();
        if (p_.compare_exchange_strong(p, mine, std::memory_order_acq_rel, std::memory_order_acquire)) return *mine;
        delete mine;  // another thread's won
        return *p;
    }

private:
    std::atomic<T*> p_{nullptr};
};

/// An object built at compile time (constinit, at namespace scope) and never destroyed: error
/// categories and stateless engines, which a function-local static would guard with that lock
/// and which must stay usable while static destructors run. `immortal<T>::value` is the object.
template <typename T>
union immortal {
    T value;
    constexpr immortal() : value() {}
    ~immortal() {}
};

/// A flag computed by `probe()` on first use.
class lazy_flag {
public:
    constexpr lazy_flag() noexcept = default;
    template <typename Probe>
    bool get(Probe probe) {
        int8_t v = v_.load(std::memory_order_relaxed);
        if (v < 0) {
            v = probe() ? 1 : 0;
            v_.store(v, std::memory_order_relaxed);
        }
        return v == 1;
    }

private:
    std::atomic<int8_t> v_{-1};
};

}  // namespace gluon
