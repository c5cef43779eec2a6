// gluon::init / gluon::fini, the process-wide vCPU registry (read by tools/gluon-gdb.py) and the
// stack-overflow reporter.
#include "gluon/runtime/vcpu.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "gluon/common/log.h"
#include "gluon/common/misuse.h"
#include "gluon/runtime/stats.h"
#include "gluon/sys/mm.h"
#include "gluon/sys/ops.h"
#include "gluon/sys/proc.h"
#include "scheduler.h"

// The registry has C linkage and plain names so that debuggers find it without symbols for
// every template: tools/gluon-gdb.py walks gluon_vcpu_list.
extern "C" {
gluon::detail::vcpu* gluon_vcpu_list = nullptr;
}

namespace gluon {
using namespace detail;

namespace {

std::mutex g_registry_mu;
int g_next_index = 0;
struct sigaction g_prev_segv;
std::once_flag g_segv_once;
constexpr size_t k_altstack_size = 64 * 1024;

void register_vcpu(vcpu* v) {
    std::lock_guard lk(g_registry_mu);
    v->index = g_next_index++;
    v->next_registered = gluon_vcpu_list;
    gluon_vcpu_list = v;
}

}  // namespace

namespace detail {
void wait_biased_sections_of(uint32_t tag, const void* lock) noexcept {
    // The registry lock keeps the vCPU (and its thread) alive while we read its counter. A
    // biased section is a few instructions, never spans a fiber switch, so this is short.
    std::lock_guard lk(g_registry_mu);
    for (vcpu* v = gluon_vcpu_list; v; v = v->next_registered)
        if (static_cast<uint32_t>(v->index) + 1 == tag) {
            const biased_sections* b = v->biased;
            for (;;) {
                bool inside = false;
                const int d = b->depth.load(std::memory_order_acquire);
                for (int i = 0; i < d; ++i) inside |= b->held[i].load(std::memory_order_acquire) == lock;
                if (!inside) return;
                __builtin_ia32_pause();
            }
        }
}

bool post_remote_if_alive(vcpu* v, remote_node* n) noexcept {
    // Under the registry's lock: fini unregisters v under it too, and only once it has seen
    // v's queue empty, so what is posted here before that runs in one of fini's rounds.
    std::lock_guard lk(g_registry_mu);
    for (vcpu* r = gluon_vcpu_list; r; r = r->next_registered)
        if (r == v) {
            post_remote(v, n);
            return true;
        }
    return false;
}
}  // namespace detail

namespace {

// Unregisters v once nothing is posted to it, or anyway when `force`. False: work is queued.
bool unregister_vcpu(vcpu* v, bool force) {
    std::lock_guard lk(g_registry_mu);
    if (!force && !v->remote.empty()) return false;
    for (vcpu** p = &gluon_vcpu_list; *p; p = &(*p)->next_registered)
        if (*p == v) {
            *p = v->next_registered;
            break;
        }
    return true;
}

void default_segv() {
    struct sigaction sa {};
    sa.sa_handler = SIG_DFL;
    (void)sys::sigaction(SIGSEGV, &sa, nullptr);
}

// Async-signal-safe report of a fiber stack overflow, then the default action (core dump).
void on_segv(int sig, siginfo_t* info, void* uctx) {
    vcpu* v = cur_vcpu();
    fiber_impl* f = v ? running(v) : nullptr;
    if (f && !f->is_main && in_guard(f->stack, info->si_addr)) {
        char buf[160];
        int n = snprintf(buf, sizeof buf,
                         "gluon: stack overflow in fiber '%s' (id %llu, stack %zu KiB): "
                         "the guard page was hit\n",
                         f->name[0] ? f->name : "(unnamed)", static_cast<unsigned long long>(f->id),
                         (f->stack.size - k_guard_size) / 1024);
        (void)sys::write(2, buf, static_cast<size_t>(n), -1);
        default_segv();
        return;  // re-executes the faulting access, now with the default action
    }
    if (g_prev_segv.sa_flags & SA_SIGINFO) {
        if (g_prev_segv.sa_sigaction) return g_prev_segv.sa_sigaction(sig, info, uctx);
    } else if (g_prev_segv.sa_handler != SIG_DFL && g_prev_segv.sa_handler != SIG_IGN) {
        return g_prev_segv.sa_handler(sig);
    }
    default_segv();
}

void install_segv_handler() {
    struct sigaction sa {};
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    (void)sys::sigaction(SIGSEGV, &sa, &g_prev_segv);
}

void setup_altstack(vcpu* v) {
    void* p = sys::mmap(nullptr, k_altstack_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (sys::is_error(p)) return;
    stack_t ss{};
    ss.ss_sp = p;
    ss.ss_size = k_altstack_size;
    stack_t old{};
    if (sys::sigaltstack(&ss, &old) < 0 || (old.ss_sp && !(old.ss_flags & SS_DISABLE))) {
        // Keep a stack someone else installed (e.g. a sanitizer runtime).
        if (old.ss_sp && !(old.ss_flags & SS_DISABLE)) (void)sys::sigaltstack(&old, nullptr);
        (void)sys::munmap(p, k_altstack_size);
        return;
    }
    v->altstack = p;
}

void teardown_altstack(vcpu* v) {
    if (!v->altstack) return;
    stack_t ss{};
    ss.ss_flags = SS_DISABLE;
    (void)sys::sigaltstack(&ss, nullptr);
    (void)sys::munmap(v->altstack, k_altstack_size);
    v->altstack = nullptr;
}

}  // namespace

namespace detail {
vcpu* current_vcpu() noexcept { return cur_vcpu(); }
}  // namespace detail

result<void> init(const init_options& opts) {
    if (cur_vcpu()) return errno_error(EEXIST);
    engine::options eo;
    eo.queue_depth = opts.queue_depth;
    eo.sqpoll = opts.sqpoll;
    std::unique_ptr<engine::engine> eng;
    std::string why;
    if (opts.engine && !std::getenv("GLUON_ENGINE")) {
        auto e = GLUON_TRY(engine::create(*opts.engine, eo));
        eng = std::move(e);
        why = "requested by init_options";
    } else {
        auto sel = GLUON_TRY(engine::select(eo));
        eng = std::move(sel.eng);
        why = std::move(sel.reason);
    }
    auto* v = new vcpu(opts.stack_cache);
    v->eng = std::move(eng);
    v->tid = static_cast<pid_t>(sys::gettid());
    v->counters.started_ns = mono_now_ns();
    if (timespec ts; pthread_getcpuclockid(pthread_self(), &v->counters.cpu_clock) == 0 &&
                     clock_gettime(v->counters.cpu_clock, &ts) == 0) {
        v->counters.has_cpu_clock = true;
        v->counters.cpu_base_ns = timespec_ns(ts);
    }
    unsigned spin_us = opts.idle_spin_us;
    if (const char* env = std::getenv("GLUON_IDLE_SPIN_US")) spin_us = static_cast<unsigned>(std::atoi(env));
    v->idle_spin_ns = static_cast<int64_t>(spin_us) * 1000;
    v->main.is_main = true;
    v->main.owner = v;
    v->main.state = fiber_state::running;
    v->main.id = static_cast<uint64_t>(v->tid) | (1ull << 63);
    strncpy(v->main.name, "main", sizeof v->main.name - 1);
#ifdef GLUON_TSAN
    v->main.tsan_fiber = __tsan_get_current_fiber();
#endif
    v->current = &v->main;
    if (auto r = make_idle_fiber(v); !r) {
        delete v;
        return r;
    }
    std::call_once(g_segv_once, install_segv_handler);
    setup_altstack(v);
    register_vcpu(v);
    t_hot = v;
    v->biased = &t_biased;
    t_vcpu_tag = biasing_available() ? static_cast<uint32_t>(v->index) + 1 : 0;
    if (opts.log_engine) GLUON_INFO("gluon: vCPU {} uses the {} engine ({})", v->index, v->eng->name(), why);
    return {};
}

// fini goes in rounds: interrupt every fiber and wait for their ends, then run the work posted
// meanwhile, which may start fibers or post more work for the next round. Work that starts more
// whenever it runs (a call that posts itself again and starts a fiber) kept it going round for
// ever: from round k_fini_open_rounds the vCPU makes no fibers, and after k_fini_rounds fini ends
// with what is still posted left unrun. Work that does not keep making more is done in a round
// or two.
constexpr unsigned k_fini_open_rounds = 16;
constexpr unsigned k_fini_rounds = 32;

result<void> fini() {
    vcpu* v = cur_vcpu();
    if (!v) {
        report_misuse("gluon::fini on a thread that is not a vCPU");
        return errno_error(EPERM);
    }
    if (running(v) != &v->main) {
        report_misuse("gluon::fini called from a fiber other than the vCPU's main fiber");
        return errno_error(EDEADLK);
    }
    for (unsigned round = 0;; ++round) {
        if (round == k_fini_open_rounds) v->closing = true;
        // Interrupt every fiber still alive and let them run to completion.
        while (v->nfibers > 0) {
            v->all.for_each([](fiber_impl& f) {
                if (f.interrupt_pending.exchange(true)) return;
                deliver_interrupt(&f);
            });
            v->fini_waiting = true;
            // Re-interrupt every 100 ms: a fiber may start another blocking call while unwinding.
            park_current(v, deadline_after(std::chrono::milliseconds(100)),
                         [](fiber_impl* f, int err) {
                             f->owner->fini_waiting = false;
                             resume(f, -err);
                         },
                         nullptr);
        }
        // Let remote work already posted to us (resumes of fibers gone, interrupts) drain, and
        // wait for wakers still inside post_remote() (they touch our engine after the push).
        poll(v, false);
        while (v->posters.load(std::memory_order_acquire) != 0) __builtin_ia32_pause();
        poll(v, false);
        // That work may have started fibers (a closure posted by runtime::post, the task runner
        // for a task spawned here): they run too, interrupted like the others. Left queued, they
        // never ran, their waiters hung, and the thread kept a task runner that was gone. It
        // may have posted more work too, which the next round runs.
        // Unregistered only now: fibers that run hold biased locks, whose holder is found
        // through the registry. The last look at the queue is made under the registry's lock
        // (see post_remote_if_alive).
        if (v->nfibers == 0 && unregister_vcpu(v, round + 1 >= k_fini_rounds)) break;
    }
    run_timer_removals(v);
    teardown_altstack(v);
    destroy_idle_fiber(v);
    t_hot = nullptr;
    t_vcpu_tag = 0;
    delete v;
    return {};
}

namespace {
// The vCPU thread's CPU time since init, at most its uptime. (Both only grow, and a listed
// vCPU's thread is alive, so the value never goes back.)
uint64_t busy_ns(const vcpu_counters& c, uint64_t uptime_ns) noexcept {
    timespec ts;
    if (!c.has_cpu_clock || clock_gettime(c.cpu_clock, &ts) != 0) return 0;
    return std::min(uptime_ns, static_cast<uint64_t>(std::max<int64_t>(timespec_ns(ts) - c.cpu_base_ns, 0)));
}
}  // namespace

std::vector<vcpu_stats> vcpu_statistics() {
    std::vector<vcpu_stats> out;
    const int64_t now = mono_now_ns();
    // The registry lock keeps every listed vCPU alive while its counters are read.
    std::lock_guard lk(g_registry_mu);
    for (vcpu* v = gluon_vcpu_list; v; v = v->next_registered) {
        const vcpu_counters& c = v->counters;
        vcpu_stats s;
        s.index = v->index;
        s.engine = v->eng->name();
        s.fibers_live = c.fibers_live.get();
        s.fibers_created = c.fibers_created.get();
        s.run_queue = c.runq.get();
        s.uptime_ns = static_cast<uint64_t>(now - c.started_ns);
        s.busy_ns = busy_ns(c, s.uptime_ns);
        s.engine_ops = c.ops.get();
        s.engine_errors = c.op_errors.get();
        s.bytes_in = c.bytes_in.get();
        s.bytes_out = c.bytes_out.get();
        out.push_back(s);
    }
    std::sort(out.begin(), out.end(), [](const vcpu_stats& a, const vcpu_stats& b) { return a.index < b.index; });
    return out;
}

bool is_vcpu() noexcept { return cur_vcpu() != nullptr; }
engine::engine* current_engine() noexcept { return cur_vcpu() ? cur_vcpu()->eng.get() : nullptr; }
int current_vcpu_index() noexcept { return cur_vcpu() ? cur_vcpu()->index : -1; }

}  // namespace gluon
