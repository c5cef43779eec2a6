// park()/wake() for fibers and for plain OS threads (futex), with timeout and interrupt.
#include "gluon/runtime/waiter.h"

#include "gluon/sys/proc.h"
#include "scheduler.h"

namespace gluon {
using namespace detail;

namespace {

long futex_wait(std::atomic<uint32_t>* word, const timespec* abs_mono) noexcept {
    return sys::futex_wait(reinterpret_cast<uint32_t*>(word), 0, abs_mono);
}

long park_thread(prim_lock& lk, waiter& w, const park_options& o) noexcept {
    lk.unlock();
    const deadline_t deadline = o.deadline;
    timespec ts{};
    const timespec* tsp = nullptr;
    if (deadline != k_no_deadline) {
        ts = {deadline / 1'000'000'000, deadline % 1'000'000'000};
        tsp = &ts;
    }
    while (w.word.load(std::memory_order_acquire) == k_parked) {
        long r = futex_wait(&w.word, tsp);
        if (r == -ETIMEDOUT) {
            // Woken meanwhile: the waker may have destroyed the primitive since.
            uint32_t st = k_parked;
            if (!w.word.compare_exchange_strong(st, k_cancelling, std::memory_order_acquire))
                break;
            lk.lock();
            if (w.hook.linked()) {
                waiter_list::unlink(w);
                if (o.after_cancel) o.after_cancel(o.primitive);
                lk.unlock();
                return -ETIMEDOUT;
            }
            lk.unlock();
            // The wake-up is on its way, its waker waiting for this (unless it woke us holding
            // the lock, and has stored k_woken over k_cancelling already): wait for it.
            st = k_cancelling;
            (void)w.word.compare_exchange_strong(st, k_parked, std::memory_order_acq_rel);
            tsp = nullptr;
        }
    }
    return w.result;
}

// For wake(), whose caller may destroy the primitive once it returns, waking a fiber of another
// vCPU or a thread: marks it woken, after letting out a timeout or interrupt of it that is
// inside the primitive (it announced itself with k_cancelling before taking the lock, and
// leaves soon: a lock taken and released). Publishes w.result to a thread.
void mark_woken(waiter& w) noexcept {
    uint32_t st = k_parked;
    while (!w.word.compare_exchange_weak(st, k_woken, std::memory_order_acq_rel)) {
        st = k_parked;
        __builtin_ia32_pause();
    }
}

}  // namespace

// Timeout or interrupt of a parked fiber, on its vCPU: whoever unlinks the waiter owns the
// wake-up. A wake-up from this vCPU made the fiber ready, so the hook is not called after it;
// one from elsewhere marked the waiter woken first, and the primitive may be gone since.
void detail::cancel_parked(fiber_impl* f, int err) noexcept {
    auto* c = static_cast<park_ctx*>(f->cancel_ctx);
    if (err == ECANCELED && !c->opts->interruptible) return;
    waiter& w = *c->w;
    uint32_t st = k_parked;
    if (!w.word.compare_exchange_strong(st, k_cancelling, std::memory_order_acquire)) return;
    c->lk->lock();
    if (!w.hook.linked()) {  // a wake-up is on its way
        c->lk->unlock();
        // Its waker waits for this store (if it is wake(); fiber_exit wakes a joiner holding
        // join_lock and does not, the joiner keeping the fiber alive instead).
        w.word.store(k_parked, std::memory_order_release);
        return;
    }
    waiter_list::unlink(w);
    if (c->opts->after_cancel) c->opts->after_cancel(c->opts->primitive);
    c->lk->unlock();
    wake(w, -err);
}

long detail::park_slow(prim_lock& lk, waiter& w, const park_options& opts) noexcept {
    if (!w.fiber) return park_thread(lk, w, opts);
    vcpu* v = cur_vcpu();
    fiber_impl* f = running(v);
    if (opts.interruptible && f->interrupt_pending.load(std::memory_order_relaxed)) {
        waiter_list::unlink(w);
        if (opts.after_cancel) opts.after_cancel(opts.primitive);
        lk.unlock();
        f->interrupt_pending.store(false, std::memory_order_relaxed);
        return -ECANCELED;
    }
    park_ctx ctx{&lk, &w, &opts};
    lk.unlock();
    long r = park_current(v, opts.deadline, cancel_parked, &ctx);
    return r;
}

void wake(waiter& w, long result) noexcept {
    w.result = result;
    if (w.fiber) {
        fiber_impl* f = impl(w.fiber);
        // On the fiber's own vCPU no cancel is under way, and resume() makes the fiber ready
        // at once, which its timer and interrupt check.
        if (f->owner != cur_vcpu()) mark_woken(w);
        resume(f, result);
    } else if (w.resume) {
        w.resume(w.resume_ctx, result);
    } else {
        mark_woken(w);
        (void)sys::futex_wake(reinterpret_cast<uint32_t*>(&w.word), 1);
    }
}

void detail::wake_holding_lock(waiter& w, long result) noexcept { wake_inline(w, result); }

void detail::wake_thread(waiter& w) noexcept {
    w.word.store(k_woken, std::memory_order_release);  // over k_cancelling too: see park_thread
    (void)sys::futex_wake(reinterpret_cast<uint32_t*>(&w.word), 1);
}

long take_interrupt() noexcept {
    vcpu* v = cur_vcpu();
    if (!v) return 0;
    fiber_impl* f = running(v);
    if (f->interrupt_pending.load(std::memory_order_relaxed) &&
        f->interrupt_pending.exchange(false, std::memory_order_acq_rel))
        return -ECANCELED;
    return 0;
}

}  // namespace gluon
