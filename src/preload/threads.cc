// Fiber mode's threads: pthread_create starts a fiber on a vCPU, and pthread join, mutexes and
// condition variables park fibers instead of threads (docs/preload.md).
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "gluon/runtime/fiber.h"
#include "gluon/runtime/fiber_local.h"
#include "gluon/sync/condition_variable.h"
#include "gluon/sync/mutex.h"
#include "gluon/sys/proc.h"
#include "preload.h"
#include "side_object.h"

namespace gluon::preload {
namespace {

thread_local bool t_gluon_thread = false;  // made by gluon (a vCPU, an offload thread)
thread_local int t_internal = 0;
std::atomic<runtime*> g_rt{nullptr};
size_t g_key = 0;  // fiber-local slot: the pthread a fiber stands for

// A thread of the program, run as a fiber. Its pthread_t is its address with the low bit set,
// which no pthread_t of libc's (an aligned struct pointer) has.
struct pfiber {
    void* (*fn)(void*);
    void* arg;
    void* ret = nullptr;
    std::atomic<int> refs;  // the fiber's, and the handle's until joined or detached
    gluon::mutex mu;
    gluon::condition_variable cv;
    bool done = false;
    std::pair<void*, size_t> stack{nullptr, 0};  // the fiber's, for pthread_getattr_np
    jmp_buf exit_to;
};

pthread_t encode(pfiber* h) { return reinterpret_cast<pthread_t>(h) | 1; }
bool ours(pthread_t t) { return t & 1; }
pfiber* decode(pthread_t t) { return reinterpret_cast<pfiber*>(t & ~pthread_t{1}); }
void unref(pfiber* h) {
    if (h->refs.fetch_sub(1, std::memory_order_acq_rel) == 1) delete h;
}

pfiber* current_pfiber() {
    if (!t_gluon_thread || !g_rt.load(std::memory_order_acquire) || !is_vcpu()) return nullptr;
    return static_cast<pfiber*>(detail::fls_slot(g_key));
}

// ---- thread-specific data (pthread keys): a value per fiber ---------------------------------
// A key the program makes is libc's (numbers stay unique, and threads that are not fibers keep
// libc's values) and gets a fiber-local slot too, which a program fiber's get and set use.
struct key_entry {
    std::atomic<size_t> slot{0};  // fiber-local key + 1; 0: not one of the program's
    std::atomic<void (*)(void*)> dtor{nullptr};
};
key_entry g_keys[PTHREAD_KEYS_MAX];
std::atomic<size_t> g_keys_seen{0};  // the highest key made + 1

void*& key_slot(size_t slot) { return detail::fls_slot(slot - 1); }

// A fiber's values of the program's keys, destroyed as a thread's are at its exit: each value
// set to NULL, then its destructor called; again while destructors set new values, up to
// PTHREAD_DESTRUCTOR_ITERATIONS rounds.
void destroy_key_values() {
    for (int round = 0; round < PTHREAD_DESTRUCTOR_ITERATIONS; ++round) {
        bool called = false;
        const size_t n = g_keys_seen.load(std::memory_order_acquire);
        for (size_t k = 0; k < n; ++k) {
            const size_t slot = g_keys[k].slot.load(std::memory_order_acquire);
            if (!slot) continue;
            void* v = std::exchange(key_slot(slot), nullptr);
            auto d = g_keys[k].dtor.load(std::memory_order_acquire);
            if (v && d) {
                d(v);
                called = true;
            }
        }
        if (!called) return;
    }
}

void run_pfiber(pfiber* h) {
    detail::fls_slot(g_key) = h;
    h->stack = this_fiber::stack();
    this_fiber::set_name("pthread");
    if (setjmp(h->exit_to) == 0) h->ret = h->fn(h->arg);
    destroy_key_values();               // still the program's thread: destructors may call pthreads
    detail::fls_slot(g_key) = nullptr;  // what follows is gluon's, not the program's
    {
        std::lock_guard lk(h->mu);
        h->done = true;
    }
    h->cv.notify_all();
    unref(h);
}

unsigned vcpu_count() {
    if (const char* e = std::getenv("GLUON_VCPUS")) {
        char* end = nullptr;
        unsigned long n = std::strtoul(e, &end, 10);
        if (end != e && *end == '\0' && n > 0 && n <= 1024) return static_cast<unsigned>(n);
        std::fprintf(stderr, "gluon preload: GLUON_VCPUS=%s is not a count from 1 to 1024; using the CPUs allowed\n", e);
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return static_cast<unsigned>(CPU_COUNT(&set));
    return 1;
}

// Threads gluon starts (vCPUs, the offload pool) come through pthread_create outside program
// context; they are marked so their pthread calls stay libc's.
struct trampoline {
    void* (*fn)(void*);
    void* arg;
};
void* run_gluon_thread(void* p) {
    trampoline t = *static_cast<trampoline*>(p);
    delete static_cast<trampoline*>(p);
    t_gluon_thread = true;
    return t.fn(t.arg);
}

// ---- mutexes and condition variables: a gluon object hung off the program's storage ---------------

struct pmutex {
    bool recursive = false;
    // Who holds m (a normal mutex): glibc lets any thread unlock a normal mutex, and programs
    // do (iperf 2 does), so the unlock is made on the holder's behalf.
    std::atomic<uintptr_t> holder{0};
    gluon::mutex m;
    gluon::recursive_mutex rm;
};
struct pcond {
    gluon::condition_variable cv;
    clockid_t clock = CLOCK_REALTIME;
};

// glibc's x86-64 pthread_mutex_t: __kind at 16, the robust list (unused by other kinds) at 24.
static_assert(sizeof(pthread_mutex_t) >= 32 && sizeof(pthread_cond_t) >= 8);
void** mutex_slot(pthread_mutex_t* m) { return reinterpret_cast<void**>(reinterpret_cast<char*>(m) + 24); }
void** cond_slot(pthread_cond_t* c) { return reinterpret_cast<void**>(c); }

pmutex* get(pthread_mutex_t* m) {
    return lazily<pmutex>(mutex_slot(m), [m](pmutex& p) {
        int kind = *reinterpret_cast<int*>(reinterpret_cast<char*>(m) + 16) & 3;
        p.recursive = kind == PTHREAD_MUTEX_RECURSIVE;
    });
}
pcond* get(pthread_cond_t* c) {
    return lazily<pcond>(cond_slot(c), [](pcond&) {});
}

// pthread_join of a fiber's pthread_t, waiting at most `wait` (negative: no limit; zero: only a
// look). 0, EDEADLK (itself), EBUSY (a look that found it running) or ETIMEDOUT.
int join_fiber(pfiber* h, void** ret, duration wait) {
    if (h == current_pfiber()) return EDEADLK;
    const int saved = errno;
    {
        std::unique_lock lk(h->mu);
        if (wait < duration::zero()) h->cv.wait(lk, [h] { return h->done; });
        else if (!h->cv.wait_for(lk, wait, [h] { return h->done; })) return wait == duration::zero() ? EBUSY : ETIMEDOUT;
    }
    if (ret) *ret = h->ret;
    unref(h);
    errno = saved;
    return 0;
}

// pthread_setaffinity_np of a fiber's pthread_t: a fiber runs on whichever vCPU it was given,
// so the call changes nothing; said once.
void note_affinity_ignored() {
    static std::atomic<bool> said{false};
    if (!said.exchange(true, std::memory_order_relaxed))
        std::fprintf(stderr, "gluon preload: pthread_setaffinity_np on a thread run as a fiber is ignored "
                             "(fibers run on the vCPUs; GLUON_VCPUS sets how many)\n");
}

// The timed lock and wait of the program's mutexes and condition variables, for `d` at most.
int lock_within(pthread_mutex_t* m, duration d) {
    pmutex* p = get(m);
    auto r = p->recursive ? p->rm.lock_for(d, false) : p->m.lock_for(d, false);
    if (!r) return ETIMEDOUT;
    if (!p->recursive) p->holder.store(gluon::mutex::current_owner_token(), std::memory_order_relaxed);
    return 0;
}
int cond_wait_for(pthread_mutex_t* m, pcond* pc, duration d) {
    pmutex* p = get(m);
    auto st = p->recursive ? pc->cv.wait_for(p->rm, d) : pc->cv.wait_for(p->m, d);
    if (!p->recursive) p->holder.store(gluon::mutex::current_owner_token(), std::memory_order_relaxed);
    return st == std::cv_status::timeout ? ETIMEDOUT : 0;
}

}  // namespace

internal_scope::internal_scope() noexcept { ++t_internal; }
internal_scope::~internal_scope() { --t_internal; }

bool program_context() noexcept {
    if (t_internal || in_signal_handler()) return false;
    if (!t_gluon_thread) return true;
    return current_pfiber() != nullptr;
}

runtime* started() noexcept { return g_rt.load(std::memory_order_acquire); }

runtime* start_runtime() noexcept {
    static runtime* rt = [] {
        internal_scope s;
        g_key = detail::fls_new_key(nullptr);
        runtime_options o;
        o.vcpus = vcpu_count();
        o.pin = false;  // inside whatever CPU set the program was started with
        o.vcpu.log_engine = false;
        auto r = runtime::start(o);
        if (!r) {
            std::fprintf(stderr, "gluon preload: cannot start %u vCPUs: %s\n", o.vcpus, r.error().message().c_str());
            std::abort();
        }
        runtime* p = r->release();  // lives until the process exits
        g_rt.store(p, std::memory_order_release);
        return p;
    }();
    return rt;
}

}  // namespace gluon::preload

using namespace gluon::preload;

extern "C" {

int pthread_create(pthread_t* thr, const pthread_attr_t* attr, void* (*fn)(void*), void* arg) {
    if (!GLUON_PROGRAM_CALL()) {
        auto* t = new trampoline{fn, arg};
        int r = GLUON_REAL(pthread_create)(thr, attr, run_gluon_thread, t);
        if (r != 0) delete t;
        return r;
    }
    gluon::runtime* rt = start_runtime();
    int detached = PTHREAD_CREATE_JOINABLE;
    if (attr) pthread_attr_getdetachstate(attr, &detached);
    // The stack size the program asked for, at least 16 KiB; gluon's default (256 KiB,
    // GLUON_STACK_SIZE) when it asked for none. glibc reports its own default (RLIMIT_STACK's
    // 8 MiB) for an attribute without a size, so that value reads as "none".
    gluon::fiber_options fo;
    if (attr) {
        static const size_t libc_default = [] {
            pthread_attr_t a;
            size_t d = 0;
            pthread_attr_init(&a);
            pthread_attr_getstacksize(&a, &d);
            pthread_attr_destroy(&a);
            return d;
        }();
        size_t want = 0;
        if (pthread_attr_getstacksize(attr, &want) == 0 && want != libc_default) fo.stack_size = want;
    }
    auto* h = new pfiber{fn, arg};
    h->refs.store(detached == PTHREAD_CREATE_DETACHED ? 1 : 2, std::memory_order_relaxed);
    static std::atomic<unsigned> next{0};
    const unsigned i = next.fetch_add(1, std::memory_order_relaxed) % rt->size();
    {
        internal_scope s;
        if (!rt->post(i, fo, [h] { run_pfiber(h); })) {
            delete h;
            return EAGAIN;
        }
    }
    *thr = encode(h);
    return 0;
}

int pthread_join(pthread_t t, void** ret) {
    if (!ours(t)) return GLUON_REAL(pthread_join)(t, ret);
    return join_fiber(decode(t), ret, gluon::duration(-1));
}
int pthread_tryjoin_np(pthread_t t, void** ret) noexcept {
    if (!ours(t)) return GLUON_REAL(pthread_tryjoin_np)(t, ret);
    return join_fiber(decode(t), ret, gluon::duration::zero());
}
int pthread_clockjoin_np(pthread_t t, void** ret, clockid_t clock, const timespec* abstime) {
    if (!ours(t)) return GLUON_REAL(pthread_clockjoin_np)(t, ret, clock, abstime);
    if (!valid_wait(clock, abstime)) return EINVAL;
    // At least a nanosecond: a deadline already past is a wait that times out, not a look.
    return join_fiber(decode(t), ret, std::max(until(clock, abstime), gluon::duration(1)));
}
int pthread_timedjoin_np(pthread_t t, void** ret, const timespec* abstime) {
    if (!ours(t)) return GLUON_REAL(pthread_timedjoin_np)(t, ret, abstime);
    return pthread_clockjoin_np(t, ret, CLOCK_REALTIME, abstime);
}

int pthread_detach(pthread_t t) noexcept {
    if (!ours(t)) return GLUON_REAL(pthread_detach)(t);
    unref(decode(t));
    return 0;
}

pthread_t pthread_self() noexcept {
    if (pfiber* h = current_pfiber()) return encode(h);
    return GLUON_REAL(pthread_self)();
}

void pthread_exit(void* ret) {
    if (pfiber* h = current_pfiber()) {
        h->ret = ret;
        abandon_once_routines();  // (the jump skips their unlocking in pthread_once)
        longjmp(h->exit_to, 1);  // to run_pfiber; C frames only (no unwinding)
    }
    GLUON_REAL(pthread_exit)(ret);
    __builtin_unreachable();
}

// Calls that would act on the vCPU's OS thread: refused for a fiber's pthread_t.
int pthread_setname_np(pthread_t t, const char* name) noexcept {
    if (!ours(t)) return GLUON_REAL(pthread_setname_np)(t, name);
    return 0;
}
int pthread_getattr_np(pthread_t t, pthread_attr_t* a) noexcept {
    if (!ours(t)) return GLUON_REAL(pthread_getattr_np)(t, a);
    pfiber* h = decode(t);
    if (int r = pthread_attr_init(a)) return r;
    if (h->stack.first) pthread_attr_setstack(a, h->stack.first, h->stack.second);
    pthread_attr_setguardsize(a, 4096);
    return 0;
}
int pthread_getaffinity_np(pthread_t t, size_t n, cpu_set_t* set) noexcept {
    if (!ours(t)) return GLUON_REAL(pthread_getaffinity_np)(t, n, set);
    return sched_getaffinity(0, n, set) == 0 ? 0 : errno;
}
int pthread_setaffinity_np(pthread_t t, size_t n, const cpu_set_t* set) noexcept {
    if (!ours(t)) return GLUON_REAL(pthread_setaffinity_np)(t, n, set);
    note_affinity_ignored();
    return 0;
}
int pthread_kill(pthread_t t, int sig) noexcept {
    if (!ours(t)) return GLUON_REAL(pthread_kill)(t, sig);
    std::fprintf(stderr, "gluon preload: pthread_kill on a thread run as a fiber is not supported\n");
    return ENOTSUP;
}
int pthread_cancel(pthread_t t) {
    if (!ours(t)) return GLUON_REAL(pthread_cancel)(t);
    std::fprintf(stderr, "gluon preload: pthread_cancel on a thread run as a fiber is not supported\n");
    return ENOTSUP;
}

int pthread_key_create(pthread_key_t* key, void (*dtor)(void*)) noexcept {
    const int r = GLUON_REAL(pthread_key_create)(key, dtor);
    if (r != 0 || current_mode() != mode::fibers || own_code(__builtin_return_address(0)) || *key >= PTHREAD_KEYS_MAX)
        return r;
    key_entry& e = g_keys[*key];
    e.dtor.store(dtor, std::memory_order_relaxed);
    e.slot.store(gluon::detail::fls_new_key(nullptr) + 1, std::memory_order_release);  // fresh: NULL everywhere
    size_t seen = g_keys_seen.load(std::memory_order_relaxed);
    while (seen <= *key && !g_keys_seen.compare_exchange_weak(seen, *key + 1, std::memory_order_acq_rel)) {
    }
    return 0;
}
int pthread_key_delete(pthread_key_t key) noexcept {
    if (key < PTHREAD_KEYS_MAX) {
        // No destructor runs for its values (POSIX); the fiber-local key goes back for the next
        // pthread_key_create, and a fiber's old value is never seen through it (fiber_local.h).
        if (size_t slot = g_keys[key].slot.exchange(0, std::memory_order_acq_rel))
            gluon::detail::fls_release_key(slot - 1);
        g_keys[key].dtor.store(nullptr, std::memory_order_relaxed);
    }
    return GLUON_REAL(pthread_key_delete)(key);
}
void* pthread_getspecific(pthread_key_t key) noexcept {
    if (key < PTHREAD_KEYS_MAX)
        if (size_t slot = g_keys[key].slot.load(std::memory_order_acquire); slot && current_pfiber()) return key_slot(slot);
    return GLUON_REAL(pthread_getspecific)(key);
}
int pthread_setspecific(pthread_key_t key, const void* v) noexcept {
    if (key < PTHREAD_KEYS_MAX)
        if (size_t slot = g_keys[key].slot.load(std::memory_order_acquire); slot && current_pfiber()) {
            key_slot(slot) = const_cast<void*>(v);
            return 0;
        }
    return GLUON_REAL(pthread_setspecific)(key, v);
}

int pthread_mutex_init(pthread_mutex_t* m, const pthread_mutexattr_t* a) noexcept {
    int r = GLUON_REAL(pthread_mutex_init)(m, a);
    *mutex_slot(m) = nullptr;
    return r;
}
int pthread_mutex_destroy(pthread_mutex_t* m) noexcept {
    if (own_code(__builtin_return_address(0))) return GLUON_REAL(pthread_mutex_destroy)(m);
    if (void* p = __atomic_exchange_n(mutex_slot(m), nullptr, __ATOMIC_ACQ_REL)) delete static_cast<pmutex*>(p);
    return GLUON_REAL(pthread_mutex_destroy)(m);
}
int pthread_mutex_lock(pthread_mutex_t* m) noexcept {
    if (!GLUON_PROGRAM_CALL()) return GLUON_REAL(pthread_mutex_lock)(m);
    const int saved = errno;
    pmutex* p = get(m);
    if (p->recursive) {
        p->rm.lock();
    } else {
        p->m.lock();
        p->holder.store(gluon::mutex::current_owner_token(), std::memory_order_relaxed);
    }
    errno = saved;
    return 0;
}
int pthread_mutex_trylock(pthread_mutex_t* m) noexcept {
    if (!GLUON_PROGRAM_CALL()) return GLUON_REAL(pthread_mutex_trylock)(m);
    pmutex* p = get(m);
    if (p->recursive) return p->rm.try_lock() ? 0 : EBUSY;
    if (!p->m.try_lock()) return EBUSY;
    p->holder.store(gluon::mutex::current_owner_token(), std::memory_order_relaxed);
    return 0;
}
int pthread_mutex_timedlock(pthread_mutex_t* m, const timespec* abstime) noexcept {
    if (!GLUON_PROGRAM_CALL()) return GLUON_REAL(pthread_mutex_timedlock)(m, abstime);
    return lock_within(m, until(CLOCK_REALTIME, abstime));
}
int pthread_mutex_clocklock(pthread_mutex_t* m, clockid_t clock, const timespec* abstime) noexcept {
    if (!GLUON_PROGRAM_CALL()) return GLUON_REAL(pthread_mutex_clocklock)(m, clock, abstime);
    if (!valid_wait(clock, abstime)) return EINVAL;
    return lock_within(m, until(clock, abstime));
}
int pthread_mutex_unlock(pthread_mutex_t* m) noexcept {
    if (!GLUON_PROGRAM_CALL()) return GLUON_REAL(pthread_mutex_unlock)(m);
    pmutex* p = get(m);
    if (p->recursive) p->rm.unlock();
    else p->m.unlock(p->holder.load(std::memory_order_relaxed));
    return 0;
}

int pthread_cond_init(pthread_cond_t* c, const pthread_condattr_t* a) noexcept {
    int r = GLUON_REAL(pthread_cond_init)(c, a);
    *cond_slot(c) = nullptr;
    if (current_mode() == mode::fibers && a && !own_code(__builtin_return_address(0))) {
        clockid_t clock = CLOCK_REALTIME;
        pthread_condattr_getclock(a, &clock);
        gluon::preload::get(c)->clock = clock;
    }
    return r;
}
int pthread_cond_destroy(pthread_cond_t* c) noexcept {
    if (current_mode() != mode::fibers || own_code(__builtin_return_address(0))) return GLUON_REAL(pthread_cond_destroy)(c);
    if (void* p = __atomic_exchange_n(cond_slot(c), nullptr, __ATOMIC_ACQ_REL)) delete static_cast<pcond*>(p);
    return 0;
}
int pthread_cond_wait(pthread_cond_t* c, pthread_mutex_t* m) {
    if (!GLUON_PROGRAM_CALL()) return GLUON_REAL(pthread_cond_wait)(c, m);
    const int saved = errno;
    pmutex* p = get(m);
    p->recursive ? get(c)->cv.wait(p->rm) : get(c)->cv.wait(p->m);
    if (!p->recursive) p->holder.store(gluon::mutex::current_owner_token(), std::memory_order_relaxed);
    errno = saved;
    return 0;
}
int pthread_cond_timedwait(pthread_cond_t* c, pthread_mutex_t* m, const timespec* abstime) {
    if (!GLUON_PROGRAM_CALL()) return GLUON_REAL(pthread_cond_timedwait)(c, m, abstime);
    pcond* pc = get(c);
    return cond_wait_for(m, pc, until(pc->clock, abstime));
}
// libstdc++'s condition_variable::wait_for and wait_until on the steady clock.
int pthread_cond_clockwait(pthread_cond_t* c, pthread_mutex_t* m, clockid_t clock, const timespec* abstime) {
    if (!GLUON_PROGRAM_CALL()) return GLUON_REAL(pthread_cond_clockwait)(c, m, clock, abstime);
    if (!valid_wait(clock, abstime)) return EINVAL;
    return cond_wait_for(m, get(c), until(clock, abstime));
}
int pthread_cond_signal(pthread_cond_t* c) noexcept {
    if (!GLUON_PROGRAM_CALL()) return GLUON_REAL(pthread_cond_signal)(c);
    get(c)->cv.notify_one();
    return 0;
}
int pthread_cond_broadcast(pthread_cond_t* c) noexcept {
    if (!GLUON_PROGRAM_CALL()) return GLUON_REAL(pthread_cond_broadcast)(c);
    get(c)->cv.notify_all();
    return 0;
}

}  // extern "C"
