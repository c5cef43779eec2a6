// Spawned tasks: start, join, detach, cancel. A root's state (done, joiner, detached) is touched
// only on its vCPU's thread; other threads post their request there (vcpu_call), so the
// spawn-and-join path of one vCPU has no atomic instruction. The frame is destroyed on that
// thread too: a joiner elsewhere is handed the result (hand_over).
#include <optional>
#include <stop_token>

#include "gluon/runtime/oneshot.h"
#include "sched.h"

namespace gluon::task_detail {

struct stop_link {
    struct fn {
        root_base* r;
        void operator()() const noexcept { root_cancel(r); }
    };
    std::optional<std::stop_callback<fn>> cb;
};

namespace {

void start_here(root_base* r, task_sched* s) noexcept {
    r->home = s;
    s->live.push_back(*r);
    if (s->stopping) r->ctx.cancelled = ECANCELED;
    s->schedule(r->h);
}

// For a joiner on another thread: moves the result to it (unless it dropped it) and destroys
// the frame here, on the task's vCPU, where its parameters belong (see joiner). The coroutine
// has left its frame: this runs from the runner or the event loop, not from its final suspend.
void hand_over(root_base* r, joiner* j) noexcept {
    if (!r->h) return;  // never started (not_started): nothing to hand over, j->moved stays false
    j->moved = !std::atomic_ref<bool>(j->drop).load(std::memory_order_acquire);
    if (j->moved) j->move_result(r->h, j->out);
    r->h.destroy();
    r->h = {};
}

// The task's vCPU cannot run it: its task runner cannot be started (no stack for its fiber, or
// the vCPU is in the last rounds of its fini). It ends without running, its frame destroyed
// here as the frame of a task that ran would be; its join gets the error (join_handle::take).
// No join or detach has reached the root yet: they are posted after the start, to this vCPU.
void not_started(root_base* r, int err) noexcept {
    r->start_error = err;
    r->h.destroy();
    r->h = {};
    r->done = true;
}

// A task awaiting the root is resumed on its own vCPU. A joiner elsewhere is handed the result
// first.
std::coroutine_handle<> resume_joiner(root_base* r, joiner* j) noexcept {
    if (j->sched != r->home) hand_over(r, j);
    if (j->h) {
        if (j->sched == r->home) return j->h;  // symmetric transfer: same vCPU
        j->wake.fn = [](vcpu_call* c) noexcept {
            auto* jj = reinterpret_cast<joiner*>(reinterpret_cast<char*>(c) - offsetof(joiner, wake));
            jj->sched->schedule(jj->h);
        };
        (void)post_call(j->sched->vcpu, j->wake);
        return std::noop_coroutine();
    }
    static_cast<oneshot*>(j->signal)->signal();  // r may be freed by the fiber from here on
    return std::noop_coroutine();
}

// Registers j on the root's vCPU; if it has ended, wakes j at once.
void register_joiner(root_base* r, joiner* j) noexcept {
    if (!r->done) {
        r->j = j;
        return;
    }
    std::coroutine_handle<> h = resume_joiner(r, j);
    if (h != std::noop_coroutine()) r->home->schedule(h);
}

// Posts c to the root's vCPU. A handle may outlive that vCPU (joined or dropped after its
// runtime stopped): once it has ended, c runs here instead. The root's state is final then:
// its task ended in that vCPU's fini, or never started there (it ends unrun now), and the
// registry's lock, taken by fini and by this post, orders this after its last change there.
// Its frame is destroyed here, as nowhere else is left.
void post_ctl(root_base* r, vcpu_call& c, void (*fn)(vcpu_call*) noexcept) noexcept {
    c.fn = fn;
    if (post_call_if_alive(r->target, c)) return;
    r->home = nullptr;  // gone, and its address may be another runner's by now
    if (!r->done) not_started(r, ESHUTDOWN);
    fn(&c);
}

root_base* ctl_owner(vcpu_call* c) noexcept {
    return reinterpret_cast<root_base*>(reinterpret_cast<char*>(c) - offsetof(root_base, ctl_call));
}

// True on the root's own vCPU once it has started there: its state may be touched directly.
// (target is fixed at spawn; home is written on that vCPU only.)
bool at_home(const root_base* r) noexcept {
    task_sched* here = t_sched;
    return here && r->target == here->vcpu && r->home == here;
}

// From another thread: hands j to the root's vCPU, which registers it (the queue publishes
// posted_joiner with the push).
void post_joiner(root_base* r, joiner* j) noexcept {
    r->posted_joiner = j;
    post_ctl(r, r->ctl_call, [](vcpu_call* c) noexcept {
        root_base* rr = ctl_owner(c);
        register_joiner(rr, rr->posted_joiner);
    });
}

}  // namespace

// Runs inside the task's final suspension. Whatever may free the frame or hand the result to
// another thread (a detached task's end, a fiber or another vCPU's task waiting for it) is left
// to the runner, once the coroutine is no longer executing (finish_roots).
std::coroutine_handle<> root_done(root_base* r) noexcept {
    r->done = true;
    task_sched* s = r->home;
    s->live.erase(*r);
    joiner* j = r->j;
    if (j && !r->detached && j->h && j->sched == s) return j->h;  // symmetric transfer
    if (r->detached || j) {
        r->next_finished = s->finished;
        s->finished = r;
    }
    return std::noop_coroutine();
}

void finish_roots(task_sched* s) noexcept {
    while (root_base* r = s->finished) {
        s->finished = r->next_finished;
        if (r->detached)
            root_free(r);
        else
            (void)resume_joiner(r, r->j);  // not a same-vCPU task: root_done transferred to those
    }
}

result<root_base*> spawn_root(std::coroutine_handle<> h, promise_base& p, const spawn_options& o) noexcept {
    task_sched* here = t_sched;
    vcpu_handle target = o.on ? o.on : here ? here->vcpu : vcpu_handle::current();
    if (!target) return errno_error(EPERM);
    auto* r = new root_base;
    r->h = h;
    r->target = target;
    p.root = r;
    p.ctx = &r->ctx;
    if (o.stop.stop_requested()) {
        // Stopped already: the task starts cancelled. (The callback would run now, before the
        // task has a home, and post its cancel to run after the task's first steps.)
        r->ctx.cancelled = ECANCELED;
    } else if (o.stop.stop_possible()) {
        r->stop = new stop_link;
        r->stop->cb.emplace(o.stop, stop_link::fn{r});
    }
    if (here ? target == here->vcpu : target == vcpu_handle::current()) {
        int err = 0;
        if (!here) here = sched_here(&err);
        if (!here) {
            r->h = {};
            root_free(r);
            return errno_error(err);
        }
        start_here(r, here);
        return r;
    }
    r->start_call.fn = [](vcpu_call* c) noexcept {
        auto* rr = reinterpret_cast<root_base*>(reinterpret_cast<char*>(c) - offsetof(root_base, start_call));
        int err = 0;
        if (task_sched* s = sched_here(&err))
            start_here(rr, s);
        else
            not_started(rr, err);
    };
    (void)post_call(target, r->start_call);
    return r;
}

result<root_base*> spawn_root_here(std::coroutine_handle<> h, promise_base& p) noexcept {
    task_sched* here = t_sched;
    if (!here) [[unlikely]]
        return spawn_root(h, p, {});
    auto* r = new root_base;
    r->h = h;
    r->target = here->vcpu;
    p.root = r;
    p.ctx = &r->ctx;
    start_here(r, here);
    return r;
}

namespace {
void destroy(root_base* r) noexcept {
    if (r->h) r->h.destroy();
    delete r;
}
}  // namespace

// cancel_state: 0 idle, 1 a cancel is posted, 3 it is running, 2 the root was freed while 1
// or 3 (the post then frees it). Only a post moves it away from 0, and none can start once
// the stop callback is gone and the handle is being freed: a plain load decides the common case.
void root_free(root_base* r) noexcept {
    if (r->stop) {
        r->stop->cb.reset();  // waits for a callback running on another thread
        delete r->stop;
        r->stop = nullptr;
    }
    if (r->cancel_state.load(std::memory_order_acquire) != 0 &&
        r->cancel_state.exchange(2, std::memory_order_acq_rel) != 0)
        return;  // the cancel post frees it
    destroy(r);
}

void root_detach(root_base* r) noexcept {
    if (at_home(r)) {
        if (r->done)
            root_free(r);
        else
            r->detached = true;
        return;
    }
    post_ctl(r, r->ctl_call, [](vcpu_call* c) noexcept {
        root_base* rr = ctl_owner(c);
        if (rr->done)
            root_free(rr);
        else
            rr->detached = true;
    });
}

void root_cancel(root_base* r) noexcept {
    if (at_home(r)) {
        if (!r->done) r->ctx.cancel(ECANCELED);
        return;
    }
    uint8_t idle = 0;
    if (!r->cancel_state.compare_exchange_strong(idle, 1, std::memory_order_acq_rel)) return;
    r->cancel_call.fn = [](vcpu_call* c) noexcept {
        auto* rr = reinterpret_cast<root_base*>(reinterpret_cast<char*>(c) - offsetof(root_base, cancel_call));
        uint8_t st = 1;
        if (!rr->cancel_state.compare_exchange_strong(st, 3, std::memory_order_acq_rel))
            return destroy(rr);  // freed meanwhile
        if (!rr->done) rr->ctx.cancel(ECANCELED);
        st = 3;
        if (!rr->cancel_state.compare_exchange_strong(st, 0, std::memory_order_acq_rel)) destroy(rr);
    };
    if (post_call_if_alive(r->target, r->cancel_call)) return;
    // Its vCPU has ended, and the task with it (see post_ctl): nothing to cancel.
    uint8_t st = 1;
    if (!r->cancel_state.compare_exchange_strong(st, 0, std::memory_order_acq_rel)) destroy(r);
}

void root_forward_cancel(root_base* r, int err) noexcept {
    (void)err;
    root_cancel(r);
}

namespace {
// Makes j the joiner of r (on r's vCPU); false if r has ended already (from here, j is not
// woken then).
bool join(root_base* r, joiner& j) noexcept {
    if (at_home(r)) {
        if (r->done) return false;
        r->j = &j;
        return true;
    }
    post_joiner(r, &j);
    return true;
}
}  // namespace

void root_wait(root_base* r, joiner& j) noexcept {
    (void)root_wait_until(r, j, k_no_deadline, false);
}

// j lives in the caller's frame while r->j points at it: the root signals `done` as the last
// thing it does with j, and this function does not return before that.
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdangling-pointer"
#endif
long root_wait_until(root_base* r, joiner& j, deadline_t deadline, bool interruptible) noexcept {
    oneshot done;
    j.signal = &done;
    j.sched = t_sched;  // a fiber on the task's vCPU takes the result from the frame itself
    j.drop = false;
    j.moved = false;
    if (!join(r, j)) return 0;
    const long res = done.wait_until(deadline, interruptible);
    if (res == 0) return 0;
    // The result is dropped with the frame on the task's vCPU. If that vCPU handed it over
    // without seeing this, it did so before running the cancel posted below: the task ended
    // before it was cancelled, and its result is the join's.
    std::atomic_ref<bool>(j.drop).store(true, std::memory_order_release);
    root_cancel(r);
    done.wait();
    return j.moved ? 0 : res;
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif

std::coroutine_handle<> root_await(root_base* r, joiner& j, result_mover move, void* out) noexcept {
    task_sched* s = t_sched;
    j.sched = s;
    if (!at_home(r)) {
        j.move_result = move;
        j.out = out;
        j.drop = false;
        j.moved = false;
        post_joiner(r, &j);
        return std::noop_coroutine();
    }
    if (r->done) return j.h;
    r->j = &j;
    if (s->take_spawned(r->h)) return transfer(r->h);
    return std::noop_coroutine();
}

}  // namespace gluon::task_detail
