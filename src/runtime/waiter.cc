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
    while (w.word.load(std::memory_order_acquire) == 0) {
        long r = futex_wait(&w.word, tsp);
        if (r == -ETIMEDOUT) {
            lk.lock();
            if (w.hook.linked()) {
                waiter_list::unlink(w);
                if (o.after_cancel) o.after_cancel(o.primitive);
                lk.unlock();
                return -ETIMEDOUT;
            }
            lk.unlock();
            tsp = nullptr;  // the wake-up is on its way: wait for it
        }
    }
    return w.result;
}

}  // namespace

// Timeout or interrupt of a parked fiber: whoever unlinks the waiter owns the wake-up.
void detail::cancel_parked(fiber_impl* f, int err) noexcept {
    auto* c = static_cast<park_ctx*>(f->cancel_ctx);
    if (err == ECANCELED && !c->opts->interruptible) return;
    c->lk->lock();
    if (!c->w->hook.linked()) {  // a wake-up is already on its way
        c->lk->unlock();
        return;
    }
    waiter_list::unlink(*c->w);
    if (c->opts->after_cancel) c->opts->after_cancel(c->opts->primitive);
    c->lk->unlock();
    wake(*c->w, -err);
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

void wake(waiter& w, long result) noexcept { wake_inline(w, result); }

void detail::wake_thread(waiter& w) noexcept {
    w.word.store(1, std::memory_order_release);
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
