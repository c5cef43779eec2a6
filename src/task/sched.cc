#include "sched.h"

#include <mutex>

#include "gluon/common/log.h"

// Every vCPU's task runner, for tools/gluon-gdb.py (`gluon tasks`), like gluon_vcpu_list.
extern "C" {
gluon::task_detail::task_sched* gluon_task_sched_list = nullptr;
}

namespace gluon::task_detail {

namespace {
std::mutex g_registry_mu;

void register_sched(task_sched* s) {
    std::lock_guard lk(g_registry_mu);
    s->next_registered = gluon_task_sched_list;
    gluon_task_sched_list = s;
}

void unregister_sched(task_sched* s) {
    std::lock_guard lk(g_registry_mu);
    for (task_sched** p = &gluon_task_sched_list; *p; p = &(*p)->next_registered)
        if (*p == s) {
            *p = s->next_registered;
            return;
        }
}
}  // namespace

thread_local constinit task_sched* t_sched = nullptr;

void ready_ring::grow() {
    const size_t ncap = cap_ ? cap_ * 2 : 256;
    auto nbuf = std::make_unique<std::coroutine_handle<>[]>(ncap);
    for (size_t i = head_, k = 0; i != tail_; ++i, ++k) nbuf[k] = buf_[i & (cap_ - 1)];
    tail_ -= head_;
    head_ = 0;
    buf_ = std::move(nbuf);
    cap_ = ncap;
}

void task_sched::wake_runner() noexcept {
    parked = false;
    lk.lock();
    if (w && w->hook.linked()) {
        waiter_list::unlink(*w);
        lk.unlock();
        wake(*w, 0);
        return;
    }
    lk.unlock();
}

namespace {

// Operations were submitted since the last look: hand them to the kernel and take what has
// completed already (a nop, a send, a read of cached data complete during the submission), so
// that the tasks they wake run without the runner parking and the event loop going round. When
// such looks keep finding nothing (a server waiting for its clients), they cost a system call
// before the one the event loop makes anyway, so they stop, and only every 16th is tried.
bool poll_before_parking(task_sched* s) noexcept {
    s->submitted = 0;
    if (s->eager_misses >= 4 && (++s->eager_probe & 15) != 0) return false;
    s->eng->wait(0);
    if (s->ready.empty()) {
        ++s->eager_misses;
        return false;
    }
    s->eager_misses = 0;
    return true;
}

// The vCPU shuts down (fini interrupted the runner): every live task is cancelled.
void stop(task_sched* s) noexcept {
    s->stopping = true;
    s->live.for_each([](root_base& r) { r.ctx.cancel(ECANCELED); });
}

// Resumes ready tasks until none is; then parks until schedule() or the vCPU's shutdown. At
// shutdown (fini interrupts every fiber) every live task is cancelled and the runner keeps
// going until the last one has ended: their engine operations must complete before the
// engine goes.
void run(task_sched* s) noexcept {
    waiter w;
    s->w = &w;
    s->stack_base = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    for (;;) {
        while (!s->ready.empty()) {
            s->ready.pop().resume();
            if (s->finished) finish_roots(s);
            // Fibers and the event loop get a turn now and then under a steady flow of tasks.
            // fini may interrupt the runner then: tasks that keep one another ready (a
            // ping-pong, a busy server) never let it park, where it would see the interrupt.
            if ((++s->turns & 63) == 0) {
                this_fiber::yield();
                if (!s->stopping && take_interrupt() == -ECANCELED) stop(s);
            }
        }
        if (s->stopping && s->live.empty()) break;
        if (s->submitted && poll_before_parking(s)) continue;
        s->lk.lock();
        s->q.push_back(w);
        s->parked = true;
        long r = park(s->lk, w, {.interruptible = !s->stopping});
        s->parked = false;
        if (r == -ECANCELED && !s->stopping) stop(s);
    }
    t_sched = nullptr;
    unregister_sched(s);
    delete s;
}

// How deep into its runner's stack (256 KiB by default) a task may transfer before the
// transfer goes through the ready queue instead.
constexpr uintptr_t k_requeue_depth = 64 * 1024;

}  // namespace

std::coroutine_handle<> transfer_or_requeue(std::coroutine_handle<> h) noexcept {
    task_sched* s = t_sched;
    const auto here = reinterpret_cast<uintptr_t>(__builtin_frame_address(0));
    // (On another stack than the runner's the difference is meaningless; a spurious requeue
    // there is only slower.)
    if (!s || here > s->stack_base || s->stack_base - here < k_requeue_depth) return h;
    s->schedule(h);
    return std::noop_coroutine();
}

task_sched* sched_here(int* err) noexcept {
    if (task_sched* s = t_sched) return s;
    int ignored = 0;
    if (!err) err = &ignored;
    if (!is_vcpu()) {
        *err = EPERM;
        return nullptr;
    }
    auto* s = new (std::nothrow) task_sched;
    if (!s) {
        *err = ENOMEM;
        return nullptr;
    }
    s->vcpu = vcpu_handle::current();
    s->eng = current_engine();
    auto f = spawn(fiber_options{.stack_size = 0, .name = "tasks"}, [s] { run(s); });
    if (!f) {
        *err = f.error().value();
        GLUON_LOG_RATE_LIMITED(warn, std::chrono::seconds(1), "gluon: cannot start the task runner: {}",
                               f.error().message());
        delete s;
        return nullptr;
    }
    (void)f->detach();
    s->vcpu_index = current_vcpu_index();
    register_sched(s);
    t_sched = s;
    return s;
}

}  // namespace gluon::task_detail
