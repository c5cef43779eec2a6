// Fiber creation, exit, join/detach/interrupt and the this_fiber functions.
#include "gluon/runtime/fiber.h"

#include <sched.h>
#include <sys/mman.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <thread>

#include "fiber_local_impl.h"
#include "gluon/common/misuse.h"
#include "gluon/sys/mm.h"
#include "gluon/sys/proc.h"
#include "scheduler.h"

namespace gluon::detail {

/// What fiber_exit wakes a joiner with when the joiner's handle reference is still the
/// joiner's to drop (see fiber_exit); 0 when it was dropped for it.
constexpr long k_join_ref_kept = 1;

namespace {

[[noreturn, gnu::always_inline]] inline void fiber_exit(fiber_impl* f) noexcept {
    if (f->fls) fls_destroy(f);
    vcpu* v = f->owner;
    f->join_lock.lock();
    f->finished = true;
    // A joiner's handle reference is dropped here, for it, when nothing of the joiner can look
    // at f once woken: a fiber of this vCPU (ready at once, so its timeout and interrupt no
    // longer run), or a continuation (join_async holds a reference of its own). A fiber of
    // another vCPU, or a thread, keeps it until it runs (see fiber::join_for): its timeout or
    // interrupt may take join_lock before the wake-up reaches it, and wake_inline, under the
    // lock, cannot wait for that.
    while (waiter* w = f->joiners.pop_front()) {
        const bool drop = w->fiber ? impl(w->fiber)->owner == v : w->resume != nullptr;
        if (drop) --f->refs;
        wake_inline(*w, drop ? 0 : k_join_ref_kept);
    }
    // Only the running reference left: nobody can reach f any more, so reap_zombies frees it
    // without taking the lock.
    f->orphan = f->refs == 1;
    f->join_lock.unlock();
    v->all.erase(*f);
    fiber_left(v);
    f->state = fiber_state::done;
    f->run_next = v->zombies;
    v->zombies = f;
    // Not next_ready(): it could run the event loop (and reap zombies) on this very stack.
    switch_to(v, f, next_or_idle(v));
    __builtin_unreachable();
}

[[noreturn]] void fiber_main(void* arg) noexcept {
    auto* f = static_cast<fiber_impl*>(arg);
    on_first_entry(f);
    f->invoke(f->storage);
    fiber_exit(f);
}

/// A cached stack still holds the record of the fiber that last ran on it, as that fiber left
/// it: unlinked from every list, no timer, no local storage, no joiner. Only what a lifetime
/// changes is reset (a constructor would write the whole record: a quarter of a spawn's work);
/// fiber_create sets the per-fiber fields after this.
void recycle_record(fiber_impl* f) noexcept {
    assert(!f->all_hook.linked() && !f->timer.armed() && !f->fls && f->joiners.empty());
    f->interrupt_pending.store(false, std::memory_order_relaxed);
    f->interrupt_queued.store(false, std::memory_order_relaxed);
    f->cancel = nullptr;
    f->refs = 2;
    f->finished = false;
    f->orphan = false;
    f->name[0] = '\0';
#ifdef GLUON_ASAN
    f->asan_fake_stack = nullptr;
#endif
}

/// A record (in its stack) for a new fiber: the fiber that ended last hands its own over
/// whole when nothing else refers to it (what reap_zombies would put in the cache and take()
/// give back: the hottest stack); else a cached stack's; else a new stack's.
result<fiber_impl*> take_record(vcpu* v, size_t usable) noexcept {
    if (fiber_impl* z = v->zombies) {
        if (!z->run_next && z->orphan && usable == v->stacks.default_usable() &&
            z->stack.size == v->stacks.default_bytes()) {
            recycle_record(pop_zombie(v));
            return z;
        }
        reap_zombies(v);
    }
    stack_mem stk = v->stacks.take(usable);
    if (!stk.empty()) {
        fiber_impl* f = record_of(stk);
        assert(f->stack.lo == stk.lo);  // the record of the stack's last fiber
        recycle_record(f);
        return f;
    }
    auto st = GLUON_TRY(stack_alloc(usable));
    fiber_impl* f = new (record_of(st)) fiber_impl;
    f->stack = st;
    return f;
}

}  // namespace

result<fiber_impl*> fiber_create(const fiber_options& opts, size_t storage_size, void** storage,
                                 void (*invoke)(void*)) {
    vcpu* v = cur_vcpu();
    if (!v) {
        report_misuse("spawning a fiber on a thread that is not a vCPU (call gluon::init first)");
        return errno_error(EPERM);
    }
    const size_t usable = opts.stack_size ? std::max<size_t>(opts.stack_size, 16 * 1024)
                                          : v->stacks.default_usable();
    if (storage_size > usable / 4) return errno_error(E2BIG);
    if (v->closing) [[unlikely]]
        return errno_error(ESHUTDOWN);
    auto rec = take_record(v, usable);
    if (!rec) return rec;
    fiber_impl* f = *rec;
    char* store = reinterpret_cast<char*>(f) - ((storage_size + 63) & ~size_t{63});
    f->owner = v;
    f->join_lock.claim_unpublished();
    // Unique per process without an atomic: vCPU indexes are never reused.
    f->id = (static_cast<uint64_t>(v->index + 1) << 40) | ++v->next_fiber_id;
    f->storage = store;
    if (opts.name) strncpy(f->name, opts.name, sizeof f->name - 1);
#ifdef GLUON_ASAN
    f->asan_bottom = f->stack.lo + k_guard_size;
    f->asan_size = static_cast<size_t>(store - static_cast<char*>(const_cast<void*>(f->asan_bottom)));
#endif
#ifdef GLUON_TSAN
    f->tsan_fiber = __tsan_create_fiber(0);
#endif
    make_context(&f->ctx, store, reinterpret_cast<void (*)(void*)>(&fiber_main), f);
    *storage = store;
    f->invoke = invoke;
    v->all.push_back(*f);
    ++v->nfibers;
    v->counters.fibers_created.add(1);
    v->counters.fibers_live.add(1);
    f->state = fiber_state::ready;
    v->runq.push_back(*f);
    return f;
}

void fiber_release(fiber_impl* f) noexcept {
    f->join_lock.lock();
    const bool last = --f->refs == 0;
    f->join_lock.unlock();
    if (last) fiber_free(f);
}

void fiber_free(fiber_impl* f) noexcept {
    const stack_mem s = f->stack;
    // No destructor run: the record stays in the stack, for recycle_record (trivially destructible).
    if (vcpu* v = cur_vcpu())
        v->stacks.put(s);
    else
        stack_free(s);
}

uint64_t fiber_id(const fiber_impl* f) noexcept { return f->id; }

}  // namespace gluon::detail

namespace gluon {
using namespace detail;

fiber& fiber::operator=(fiber&& o) noexcept {
    if (this != &o) {
        if (f_) fiber_release(f_);
        f_ = std::exchange(o.f_, nullptr);
    }
    return *this;
}

result<void> fiber::join_for(duration timeout) {
    if (!f_) {
        report_misuse("join on a fiber that is not joinable (joined or detached already)");
        return errno_error(EINVAL);
    }
    if (cur_vcpu() && cur_vcpu()->current == f_) {
        report_misuse("a fiber joining itself");
        return errno_error(EDEADLK);
    }
    fiber_impl* f = f_;
    f->join_lock.lock();
    if (!f->finished) {
        waiter w;
        f->joiners.push_back(w);
        long r = park(f->join_lock, w, {.deadline = deadline_after(timeout)});
        if (r < 0) return errno_error(static_cast<int>(-r));  // still joinable
        // Woken by fiber_exit, which dropped our reference under its lock if we are a fiber of
        // its vCPU: one lock round trip fewer on the path of such joins. Else it is ours.
        f_ = nullptr;
        if (r == k_join_ref_kept) fiber_release(f);
        return {};
    }
    const bool last = --f->refs == 0;
    f->join_lock.unlock();
    f_ = nullptr;
    if (last) fiber_free(f);
    return {};
}

long fiber::join_async(waiter& w) noexcept {
    if (!f_) return -EINVAL;
    fiber_impl* f = f_;
    f->join_lock.lock();
    if (!f->finished) {
        // fiber_exit drops the handle's reference when it wakes us, as for a parked joiner;
        // w's own keeps f for a cancel_join after that, until end_join.
        ++f->refs;
        w.data = f;
        f->joiners.push_back(w);
        f->join_lock.unlock();
        f_ = nullptr;
        return k_waiting;
    }
    const bool last = --f->refs == 0;
    f->join_lock.unlock();
    f_ = nullptr;
    if (last) fiber_free(f);
    return 0;
}

bool fiber::cancel_join(waiter& w, fiber& back) noexcept {
    auto* f = static_cast<fiber_impl*>(w.data);
    if (!detail::cancel_linked(f->join_lock, w)) return false;
    back = fiber(f);
    return true;
}

void fiber::end_join(waiter& w) noexcept { fiber_release(static_cast<fiber_impl*>(w.data)); }

result<void> fiber::detach() {
    if (!f_) {
        report_misuse("detach on a fiber that is not joinable");
        return errno_error(EINVAL);
    }
    fiber_release(std::exchange(f_, nullptr));
    return {};
}

result<void> fiber::interrupt() {
    if (!f_) return errno_error(EINVAL);
    fiber_impl* f = f_;
    if (f->interrupt_pending.exchange(true, std::memory_order_acq_rel)) return {};
    if (f->owner == cur_vcpu()) {
        deliver_interrupt(f);
        return {};
    }
    if (f->interrupt_queued.exchange(true, std::memory_order_acq_rel)) return {};
    f->join_lock.lock();
    ++f->refs;  // keeps f alive until delivered
    f->join_lock.unlock();
    f->interrupt_node.run = [](vcpu* v, remote_node* n) {
        auto* f = reinterpret_cast<fiber_impl*>(reinterpret_cast<char*>(n) -
                                                offsetof(fiber_impl, interrupt_node));
        f->interrupt_queued.store(false, std::memory_order_release);
        if (f->owner != v && f->state != fiber_state::done) {
            // It migrated meanwhile: follow it.
            f->interrupt_queued.store(true, std::memory_order_relaxed);
            post_remote(f->owner, n);
            return;
        }
        deliver_interrupt(f);
        fiber_release(f);
    };
    post_remote(f->owner, &f->interrupt_node);
    return {};
}

namespace this_fiber {

}  // namespace this_fiber

void detail::yield_slow() noexcept {
    vcpu* v = cur_vcpu();
    if (!v) {
        (void)sys::sched_yield();
        return;
    }
    fiber_impl* cur = running(v);
    if (v->runq.empty()) {
        // Nobody else is ready: stay, but let the event loop in now and then.
        maybe_poll(v);
        if (v->runq.empty()) return;
    }
    maybe_poll(v);
    cur->state = fiber_state::ready;
    v->runq.push_back(*cur);
    fiber_impl* next = impl(v->runq.pop_front());
    if (next != cur) switch_to(v, cur, next);
    else cur->state = fiber_state::running;
}

namespace this_fiber {

result<void> sleep_until(deadline_t deadline) noexcept {
    vcpu* v = cur_vcpu();
    if (!v) {
        timespec ts{deadline / 1'000'000'000, deadline % 1'000'000'000};
        while (sys::sleep_until_mono(&ts) == -EINTR) {
        }
        return {};
    }
    if (long r = take_interrupt()) return errno_error(static_cast<int>(-r));
    if (deadline <= mono_now_ns()) {
        yield();
        return {};
    }
    long r = park_current(v, deadline, [](fiber_impl* f, int err) { resume(f, -err); }, nullptr);
    if (r == -ETIMEDOUT || r == 0) return {};
    return errno_error(static_cast<int>(-r));
}

result<void> sleep_for(duration d) noexcept { return sleep_until(deadline_after(d)); }

uint64_t id() noexcept {
    if (vcpu* v = cur_vcpu()) return running(v)->id;
    static std::atomic<uint64_t> next{1ull << 62};
    thread_local uint64_t tid = next.fetch_add(1);
    return tid;
}

void set_name(const char* name) noexcept {
    if (vcpu* v = cur_vcpu()) {
        strncpy(running(v)->name, name ? name : "", sizeof running(v)->name - 1);
    }
}

const char* name() noexcept { return cur_vcpu() ? running(cur_vcpu())->name : ""; }

void trim_stack() noexcept {
    vcpu* v = cur_vcpu();
    if (!v) return;
    fiber_impl* f = running(v);
    if (f->is_main || !f->stack.lo) return;
    // Everything a page below the current frame is unused now; the kernel gives zero pages
    // back if it is touched again. The guard page is left alone.
    char marker;
    auto sp = reinterpret_cast<uintptr_t>(&marker);
    uintptr_t lo = reinterpret_cast<uintptr_t>(f->stack.lo) + k_guard_size;
    uintptr_t hi = (sp & ~uintptr_t(4095)) - 2 * 4096;
    if (hi > lo) (void)sys::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
}

std::pair<void*, size_t> stack() noexcept {
    vcpu* v = cur_vcpu();
    if (!v) return {nullptr, 0};
    fiber_impl* f = running(v);
    if (f->is_main || !f->stack.lo) return {nullptr, 0};
    return {f->stack.lo + k_guard_size, f->stack.size - k_guard_size};
}

bool interrupt_pending() noexcept {
    return cur_vcpu() && running(cur_vcpu())->interrupt_pending.load(std::memory_order_relaxed);
}

result<void> migrate_to(vcpu_handle target) noexcept {
    vcpu* v = cur_vcpu();
    vcpu* to = target.get();
    if (!v || !to) return errno_error(EINVAL);
    fiber_impl* f = running(v);
    if (to == v) return {};
    if (f->is_main) {
        report_misuse("migrating a vCPU's main fiber");
        return errno_error(EINVAL);
    }
    v->all.erase(*f);
    fiber_left(v);
    f->state = fiber_state::waiting;
    f->owner = to;
    // Hand f to the target only once we are off its stack.
    f->migrate_node.run = [](vcpu* nv, remote_node* n) {
        auto* f = reinterpret_cast<fiber_impl*>(reinterpret_cast<char*>(n) -
                                                offsetof(fiber_impl, migrate_node));
        nv->all.push_back(*f);
        ++nv->nfibers;
        nv->counters.fibers_live.add(1);
        f->state = fiber_state::ready;
        nv->runq.push_back(*f);
    };
    // The idle fiber posts f to the target once we are off f's stack: no other fiber may run
    // (or run the event loop) on it after this point.
    v->migrating = f;
    fiber_impl* next = v->idle;
    switch_to(v, f, next);
    return {};
}

}  // namespace this_fiber
}  // namespace gluon
