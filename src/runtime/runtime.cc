#include "gluon/runtime/runtime.h"

#include <sched.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>

#include "gluon/runtime/fiber.h"
#include "gluon/runtime/waiter.h"
#include "gluon/runtime/oneshot.h"
#include "gluon/sys/proc.h"
#include "scheduler.h"

namespace gluon {
using namespace detail;

namespace {

// A closure posted to a vCPU; runs in a fresh fiber there.
struct posted : remote_node {
    std::function<void()> fn;
    oneshot* done = nullptr;  // run(): the poster waits on it until the fiber ends
    int* failed = nullptr;    // run(): where the fiber's creation error goes
    fiber_options opts;
};

void finish(posted* p) {
    if (p->done) p->done->signal();
    delete p;
}

void run_posted(vcpu*, remote_node* n) {
    auto* p = static_cast<posted*>(n);
    auto f = spawn(p->opts, [p] {
        p->fn();
        finish(p);
    });
    if (!f) {
        // Out of stacks: the closure is dropped, the waiter released and told.
        if (p->failed) *p->failed = f.error().value();
        finish(p);
        return;
    }
    (void)f->detach();
}

}  // namespace

struct runtime::vcpu_slot {
    std::thread thread;
    detail::vcpu* v = nullptr;
    // The vCPU's main fiber parks on `stop_w` until the runtime stops.
    prim_lock lk{prim_lock::shared};  // the runtime stops from another thread
    waiter_list stop_q;
    bool stopping = false;
    std::mutex up_mu;
    std::condition_variable up_cv;
    bool up = false;
    std::error_code err;
};

result<std::unique_ptr<runtime>> runtime::start(const runtime_options& opts) {
    unsigned n = opts.vcpus ? opts.vcpus : std::max(1u, std::thread::hardware_concurrency());
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    std::unique_ptr<runtime> rt(new runtime);
    for (unsigned i = 0; i < n; ++i) {
        auto slot = std::make_unique<vcpu_slot>();
        vcpu_slot* s = slot.get();
        init_options io = opts.vcpu;
        s->thread = std::thread([s, io, i, pin = opts.pin, cpus] {
            if (pin && cpus > 0) {
                cpu_set_t set;
                CPU_ZERO(&set);
                CPU_SET(static_cast<int>(i % static_cast<unsigned>(cpus)), &set);
                (void)sys::set_affinity(&set);
            }
            auto r = init(io);
            {
                std::lock_guard lk(s->up_mu);
                s->err = r.error();
                s->v = r ? current_vcpu() : nullptr;
                s->up = true;
            }
            s->up_cv.notify_all();
            if (!r) return;
            s->lk.lock();
            if (!s->stopping) {
                waiter w;
                s->stop_q.push_back(w);
                (void)park(s->lk, w, {.interruptible = false});
            } else {
                s->lk.unlock();
            }
            (void)fini();
        });
        {
            std::unique_lock lk(s->up_mu);
            s->up_cv.wait(lk, [s] { return s->up; });
        }
        rt->vcpus_.push_back(std::move(slot));
        if (s->err) return unexpected(s->err);  // ~runtime stops the ones started
    }
    return rt;
}

runtime::~runtime() {
    for (auto& s : vcpus_) {
        waiter_list q;
        s->lk.lock();
        s->stopping = true;
        q.splice_back(s->stop_q);
        s->lk.unlock();
        while (waiter* w = q.pop_front()) wake(*w, 0);
    }
    for (auto& s : vcpus_)
        if (s->thread.joinable()) s->thread.join();
}

vcpu_handle runtime::vcpu(unsigned i) const noexcept {
    return i < vcpus_.size() ? vcpu_handle(vcpus_[i]->v) : vcpu_handle();
}

namespace {
// Hands p to the slot's vCPU unless the runtime is stopping (the vCPU may be gone then; a
// fiber of another vCPU posting while it unwinds from the stop's interrupt would write freed
// memory). Under the slot's lock, which ~runtime takes to set `stopping` before the vCPU can
// start fini: a post that got in first is run by fini's drain. Errors: ESHUTDOWN.
result<void> push(runtime::vcpu_slot& s, posted* p) {
    s.lk.lock();
    if (s.stopping) {
        s.lk.unlock();
        delete p;
        return errno_error(ESHUTDOWN);
    }
    post_remote(s.v, p);
    s.lk.unlock();
    return {};
}
}  // namespace

result<void> runtime::post(unsigned i, std::function<void()> fn) { return post(i, {}, std::move(fn)); }

result<void> runtime::post(unsigned i, const fiber_options& opts, std::function<void()> fn) {
    if (i >= vcpus_.size() || !vcpus_[i]->v) return errno_error(EINVAL);
    auto* p = new posted;
    p->fn = std::move(fn);
    p->opts = opts;
    p->run = run_posted;
    return push(*vcpus_[i], p);
}

result<void> runtime::run(unsigned i, std::function<void()> fn) { return run(i, {}, std::move(fn)); }

result<void> runtime::run(unsigned i, const fiber_options& opts, std::function<void()> fn) {
    if (i >= vcpus_.size() || !vcpus_[i]->v) return errno_error(EINVAL);
    oneshot done;
    int failed = 0;
    auto* p = new posted;
    p->fn = std::move(fn);
    p->opts = opts;
    p->run = run_posted;
    p->done = &done;
    p->failed = &failed;
    GLUON_TRY(push(*vcpus_[i], p));
    done.wait();
    // fn did not run: call() has no value to give.
    if (failed) return errno_error(failed);
    return {};
}

result<std::unique_ptr<work_pool>> work_pool::create(unsigned vcpus, bool pin) {
    runtime_options o;
    o.vcpus = vcpus;
    o.pin = pin;
    o.vcpu.log_engine = false;
    auto rt = GLUON_TRY(runtime::start(o));
    return std::unique_ptr<work_pool>(new work_pool(std::move(rt)));
}

result<void> work_pool::async(std::function<void()> fn) { return rt_->post(next(), std::move(fn)); }
result<void> work_pool::call(std::function<void()> fn) { return rt_->run(next(), std::move(fn)); }

}  // namespace gluon
