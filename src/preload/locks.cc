// Fiber mode's reader-writer locks, barriers, pthread_once, spin locks and sched_yield. Like its
// mutexes (threads.cc), a gluon object hung off the program's pthread_rwlock_t or
// pthread_barrier_t (a once control has no room: its lock is found by address), so a fiber that
// waits parks instead of blocking its vCPU (docs/preload.md). Process-shared ones stay libc's.
#include <pthread.h>
#include <sched.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "gluon/runtime/fiber.h"
#include "gluon/runtime/fiber_local.h"
#include "gluon/sync/condition_variable.h"
#include "gluon/sync/mutex.h"
#include "preload.h"
#include "side_object.h"

namespace gluon::preload {
namespace {

// ---- reader-writer locks -----------------------------------------------------------------------
// Readers first, as glibc's default (PTHREAD_RWLOCK_PREFER_READER_NP): a thread that holds a read
// lock may take it again while a writer waits. The kind
// PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP (pthread_rwlockattr_setkind_np, or its static
// initializer) puts writers first, as glibc does: while a writer waits no read lock is given, so
// a stream of readers cannot starve it (read locks then do not nest). glibc serves
// PTHREAD_RWLOCK_PREFER_WRITER_NP as readers first; so does this.
// The writer is remembered, so that unlock knows which lock it releases and a thread asking
// again for a lock it holds for writing gets EDEADLK, as from glibc.
struct prwlock {
    gluon::mutex m;
    gluon::condition_variable readers_cv, writers_cv;
    unsigned readers = 0;
    unsigned writers_waiting = 0;
    uintptr_t writer = 0;  // the holder's owner token; 0: not held for writing
    bool prefer_writer = false;
};

// glibc's x86-64 pthread_rwlock_t: __pad2 is never used; __shared says process-shared; __flags
// is the kind, set by pthread_rwlock_init or a static initializer.
static_assert(sizeof(pthread_rwlock_t) == 56);
void** rwlock_slot(pthread_rwlock_t* l) { return reinterpret_cast<void**>(&l->__data.__pad2); }
bool shared(pthread_rwlock_t* l) { return __atomic_load_n(&l->__data.__shared, __ATOMIC_RELAXED) != 0; }
prwlock* get(pthread_rwlock_t* l) {
    return lazily<prwlock>(rwlock_slot(l), [l](prwlock& p) {
        p.prefer_writer = l->__data.__flags == PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP;
    });
}

// Takes l for reading or writing within `d` (negative: no limit; zero: only a try). 0, EBUSY (a
// try), ETIMEDOUT, EDEADLK (the caller holds it for writing) or EAGAIN (too many readers).
int rwlock_take(pthread_rwlock_t* l, bool write, duration d) {
    prwlock* p = get(l);
    const uintptr_t me = gluon::mutex::current_owner_token();
    std::unique_lock lk(p->m);
    if (p->writer == me) return EDEADLK;
    auto free_for_me = [p, write] {
        if (p->writer) return false;
        return write ? p->readers == 0 : !(p->prefer_writer && p->writers_waiting);
    };
    if (!free_for_me()) {
        if (d == duration::zero()) return EBUSY;
        auto& cv = write ? p->writers_cv : p->readers_cv;
        if (write) ++p->writers_waiting;
        bool got = true;
        if (d < duration::zero()) cv.wait(lk, free_for_me);
        else got = cv.wait_for(lk, d, free_for_me);
        // A writer that gives up may have been the last one holding readers off.
        if (write && --p->writers_waiting == 0 && !got && !p->writer && p->prefer_writer)
            p->readers_cv.notify_all();
        if (!got) return ETIMEDOUT;
    }
    if (write) {
        p->writer = me;
    } else {
        if (p->readers == UINT32_MAX) return EAGAIN;
        ++p->readers;
    }
    return 0;
}

int rwlock_release(pthread_rwlock_t* l) {
    prwlock* p = get(l);
    std::unique_lock lk(p->m);
    if (p->writer) {
        p->writer = 0;
        if (!p->prefer_writer || !p->writers_waiting) p->readers_cv.notify_all();  // (else a writer is next)
        p->writers_cv.notify_all();  // (all: one that was told and then timed out would lose it)
    } else if (p->readers) {
        if (--p->readers == 0) p->writers_cv.notify_all();
    } else {
        return EPERM;  // not held
    }
    return 0;
}

int rwlock_timed(pthread_rwlock_t* l, bool write, clockid_t clock, const timespec* abstime) {
    if (!valid_wait(clock, abstime)) return EINVAL;
    // A deadline already passed still takes a free lock, as glibc's does.
    const duration d = until(clock, abstime);
    return rwlock_take(l, write, d == duration::zero() ? duration(1) : d);
}

// ---- barriers ----------------------------------------------------------------------------------
// Made by pthread_barrier_init (a barrier has no static initializer), with its count.
struct pbarrier {
    gluon::mutex m;
    gluon::condition_variable cv;
    unsigned count = 0;
    unsigned arrived = 0;
    uint64_t round = 0;
};

// glibc's x86-64 pthread_barrier_t is 32 bytes of which its barrier uses the first 20.
static_assert(sizeof(pthread_barrier_t) == 32);
void** barrier_slot(pthread_barrier_t* b) { return reinterpret_cast<void**>(reinterpret_cast<char*>(b) + 24); }

// ---- pthread_once ------------------------------------------------------------------------------
// glibc's once control: bit 1 set once the init routine has run (bit 0: running, the rest: a
// fork generation). A fiber that finds it not done takes the control's lock, a recursive one (an
// init routine may call pthread_once on another control, or parks), and runs the routine unless
// another did meanwhile; fibers arriving while it runs park on the lock.
constexpr int k_once_done = 2;

gluon::recursive_mutex& once_lock(pthread_once_t* o) {
    static std::mutex mu;  // (libc's: this library's own code)
    static auto* locks = new std::unordered_map<pthread_once_t*, std::unique_ptr<gluon::recursive_mutex>>;
    std::lock_guard g(mu);
    auto& p = (*locks)[o];
    if (!p) p = std::make_unique<gluon::recursive_mutex>();
    return *p;
}

// The init routines the calling fiber (or thread) is inside, innermost first, each on its
// pthread_once's stack frame. A routine left by an exception or a thread's cancellation unwinds
// through its frame, which unlocks the control; pthread_exit of a fiber leaves by a longjmp that
// skips it, so it unlocks the controls itself (abandon_once_routines).
struct once_running {
    gluon::recursive_mutex& lock;
    once_running* outer;

    static void*& innermost() {
        static const size_t key = gluon::detail::fls_new_key(nullptr);
        return gluon::detail::fls_slot(key);
    }
    explicit once_running(gluon::recursive_mutex& l) : lock(l) {
        lock.lock();
        outer = static_cast<once_running*>(innermost());
        innermost() = this;
    }
    ~once_running() {
        innermost() = outer;
        lock.unlock();
    }
};

}  // namespace

void abandon_once_routines() noexcept {
    void*& innermost = once_running::innermost();
    for (auto* r = static_cast<once_running*>(innermost); r; r = r->outer) r->lock.unlock();
    innermost = nullptr;
}

}  // namespace gluon::preload

using namespace gluon::preload;
using gluon::duration;

extern "C" {

// Spin locks and yields: a fiber spinning for a lock (or a flag) that a fiber of its own vCPU
// holds would spin for good, the holder never getting the vCPU back. Each failed try, and each
// sched_yield, lets the vCPU's other fibers run.
int pthread_spin_lock(pthread_spinlock_t* l) noexcept {
    if (!program_fiber() || own_code(__builtin_return_address(0))) return GLUON_REAL(pthread_spin_lock)(l);
    while (GLUON_REAL(pthread_spin_trylock)(l) != 0) gluon::this_fiber::yield();
    return 0;
}
int sched_yield() noexcept {
    if (!program_fiber() || own_code(__builtin_return_address(0))) return GLUON_REAL(sched_yield)();
    gluon::this_fiber::yield();
    return 0;
}

// A routine that ends by cancellation, pthread_exit or an exception leaves the control not done
// and unlocked, as if never called (POSIX; glibc does the same): the next caller runs its routine.
int pthread_once(pthread_once_t* o, void (*init)(void)) {
    if (!GLUON_PROGRAM_CALL()) return GLUON_REAL(pthread_once)(o, init);
    if (__atomic_load_n(o, __ATOMIC_ACQUIRE) & k_once_done) return 0;
    once_running running(once_lock(o));
    if (!(__atomic_load_n(o, __ATOMIC_ACQUIRE) & k_once_done)) {
        init();
        __atomic_store_n(o, k_once_done, __ATOMIC_RELEASE);
    }
    return 0;
}

int pthread_rwlock_init(pthread_rwlock_t* l, const pthread_rwlockattr_t* a) noexcept {
    const int r = GLUON_REAL(pthread_rwlock_init)(l, a);
    if (r == 0) *rwlock_slot(l) = nullptr;
    return r;
}
int pthread_rwlock_destroy(pthread_rwlock_t* l) noexcept {
    if (void* p = __atomic_exchange_n(rwlock_slot(l), nullptr, __ATOMIC_ACQ_REL)) delete static_cast<prwlock*>(p);
    return GLUON_REAL(pthread_rwlock_destroy)(l);
}

#define GLUON_RWLOCK_CALL(l) (GLUON_PROGRAM_CALL() && !shared(l))

int pthread_rwlock_rdlock(pthread_rwlock_t* l) noexcept {
    if (!GLUON_RWLOCK_CALL(l)) return GLUON_REAL(pthread_rwlock_rdlock)(l);
    return rwlock_take(l, false, duration(-1));
}
int pthread_rwlock_wrlock(pthread_rwlock_t* l) noexcept {
    if (!GLUON_RWLOCK_CALL(l)) return GLUON_REAL(pthread_rwlock_wrlock)(l);
    return rwlock_take(l, true, duration(-1));
}
int pthread_rwlock_tryrdlock(pthread_rwlock_t* l) noexcept {
    if (!GLUON_RWLOCK_CALL(l)) return GLUON_REAL(pthread_rwlock_tryrdlock)(l);
    const int r = rwlock_take(l, false, duration::zero());
    return r == EDEADLK ? EBUSY : r;
}
int pthread_rwlock_trywrlock(pthread_rwlock_t* l) noexcept {
    if (!GLUON_RWLOCK_CALL(l)) return GLUON_REAL(pthread_rwlock_trywrlock)(l);
    const int r = rwlock_take(l, true, duration::zero());
    return r == EDEADLK ? EBUSY : r;
}
int pthread_rwlock_timedrdlock(pthread_rwlock_t* l, const timespec* t) noexcept {
    if (!GLUON_RWLOCK_CALL(l)) return GLUON_REAL(pthread_rwlock_timedrdlock)(l, t);
    return rwlock_timed(l, false, CLOCK_REALTIME, t);
}
int pthread_rwlock_timedwrlock(pthread_rwlock_t* l, const timespec* t) noexcept {
    if (!GLUON_RWLOCK_CALL(l)) return GLUON_REAL(pthread_rwlock_timedwrlock)(l, t);
    return rwlock_timed(l, true, CLOCK_REALTIME, t);
}
int pthread_rwlock_clockrdlock(pthread_rwlock_t* l, clockid_t c, const timespec* t) noexcept {
    if (!GLUON_RWLOCK_CALL(l)) return GLUON_REAL(pthread_rwlock_clockrdlock)(l, c, t);
    return rwlock_timed(l, false, c, t);
}
int pthread_rwlock_clockwrlock(pthread_rwlock_t* l, clockid_t c, const timespec* t) noexcept {
    if (!GLUON_RWLOCK_CALL(l)) return GLUON_REAL(pthread_rwlock_clockwrlock)(l, c, t);
    return rwlock_timed(l, true, c, t);
}
int pthread_rwlock_unlock(pthread_rwlock_t* l) noexcept {
    if (!GLUON_RWLOCK_CALL(l)) return GLUON_REAL(pthread_rwlock_unlock)(l);
    return rwlock_release(l);
}

int pthread_barrier_init(pthread_barrier_t* b, const pthread_barrierattr_t* a, unsigned count) noexcept {
    const int r = GLUON_REAL(pthread_barrier_init)(b, a, count);  // checks count and the attribute
    if (r != 0) return r;
    *barrier_slot(b) = nullptr;
    int pshared = PTHREAD_PROCESS_PRIVATE;
    if (a) pthread_barrierattr_getpshared(a, &pshared);
    if (current_mode() == mode::fibers && pshared == PTHREAD_PROCESS_PRIVATE) {
        auto* p = new pbarrier;
        p->count = count;
        *barrier_slot(b) = p;
    }
    return 0;
}
int pthread_barrier_destroy(pthread_barrier_t* b) noexcept {
    if (void* p = __atomic_exchange_n(barrier_slot(b), nullptr, __ATOMIC_ACQ_REL)) delete static_cast<pbarrier*>(p);
    return GLUON_REAL(pthread_barrier_destroy)(b);
}
// The last to arrive gets PTHREAD_BARRIER_SERIAL_THREAD and opens the round for the others.
int pthread_barrier_wait(pthread_barrier_t* b) noexcept {
    auto* p = static_cast<pbarrier*>(__atomic_load_n(barrier_slot(b), __ATOMIC_ACQUIRE));
    if (!p || !GLUON_PROGRAM_CALL()) return GLUON_REAL(pthread_barrier_wait)(b);
    std::unique_lock lk(p->m);
    const uint64_t round = p->round;
    if (++p->arrived == p->count) {
        p->arrived = 0;
        ++p->round;
        p->cv.notify_all();
        return PTHREAD_BARRIER_SERIAL_THREAD;
    }
    p->cv.wait(lk, [p, round] { return p->round != round; });
    return 0;
}

}  // extern "C"
