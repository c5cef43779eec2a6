// Fiber mode's stand-ins for libc's synchronisation objects: a gluon object hung off spare
// bytes of the program's pthread_mutex_t, pthread_cond_t, pthread_rwlock_t or
// pthread_barrier_t, made on first use; and the absolute deadlines of their timed waits. Private
// to src/preload.
#pragma once

#include <time.h>

#include "gluon/common/clock.h"

namespace gluon::preload {

/// The object in *slot, made (and set up by init) by the first caller; racing callers agree on
/// one.
template <typename T, typename Init>
T* lazily(void** slot, Init init) {
    if (void* p = __atomic_load_n(slot, __ATOMIC_ACQUIRE)) return static_cast<T*>(p);
    T* fresh = new T;
    init(*fresh);
    void* expected = nullptr;
    if (!__atomic_compare_exchange_n(slot, &expected, fresh, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        delete fresh;
        return static_cast<T*>(expected);
    }
    return fresh;
}

/// The time left until abstime on clock (zero once it has passed).
inline duration until(clockid_t clock, const timespec* abstime) {
    timespec now;
    clock_gettime(clock, &now);
    int64_t ns = (abstime->tv_sec - now.tv_sec) * 1'000'000'000LL + (abstime->tv_nsec - now.tv_nsec);
    return duration(ns > 0 ? ns : 0);
}

/// The clocks glibc's clock-taking waits accept, and a well-formed time.
inline bool valid_wait(clockid_t clock, const timespec* abstime) {
    return (clock == CLOCK_REALTIME || clock == CLOCK_MONOTONIC) && abstime->tv_nsec >= 0 &&
           abstime->tv_nsec < 1'000'000'000L;
}

}  // namespace gluon::preload
