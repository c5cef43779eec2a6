// Fiber mode's signal handlers: a handler runs on whichever thread the kernel picks, often a
// vCPU's, in the middle of a fiber or of the scheduler itself. The async-signal-safe calls a
// handler makes (write to a self-pipe, above all) must then be libc's plain system calls: as
// gluon calls they would park "the current fiber" from inside the handler and corrupt the
// vCPU's run queue. So the program's handlers are installed behind a trampoline that marks the
// thread as running a handler, and every interposer passes calls made there to libc. The
// trampoline also wakes fibers in pause or sigsuspend (docs/preload.md).
#include <setjmp.h>
#include <sys/eventfd.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

#include "gluon/posix.h"
#include "gluon/sys/ops.h"
#include "preload.h"

namespace gluon::preload {
namespace {

// How deep the thread is in the program's signal handlers. initial-exec: a handler must not be
// the first to touch this library's TLS through __tls_get_addr.
__attribute__((tls_model("initial-exec"))) thread_local int t_handler_depth = 0;

// The program's handler of each signal, as it gave it (sa_handler or sa_sigaction).
struct installed {
    std::atomic<void*> fn{nullptr};
    std::atomic<bool> siginfo{false};
};
installed g_handlers[NSIG];

// pause and sigsuspend: a fiber returns once a handler has run since its call began. The
// trampoline counts handler runs; a waiter notes the count when it starts and waits until it
// has moved. A shared semaphore of wake-ups (one token per handler run) was wrong both ways:
// a handler that raised a second signal left a spare token, so the next pause returned at
// once. Each waiter has a slot with an eventfd of its own (a counter, made once and kept), and
// a handler run writes to every busy slot's: a wake-up that is spare by the count only makes
// its waiter look again.
constexpr int k_wait_slots = 256;
struct wait_slot {
    std::atomic<bool> busy{false};
    std::atomic<int> fd{-1};
};
wait_slot g_slots[k_wait_slots];
std::atomic<uint64_t> g_handler_runs{0};
std::atomic<int> g_pausing{0};  // waiters, so that a handler run with none looks at no slot

void trampoline(int sig, siginfo_t* info, void* ctx) {
    ++t_handler_depth;
    const installed& h = g_handlers[sig];
    void* fn = h.fn.load(std::memory_order_acquire);
    if (h.siginfo.load(std::memory_order_relaxed))
        reinterpret_cast<void (*)(int, siginfo_t*, void*)>(fn)(sig, info, ctx);
    else if (fn)
        reinterpret_cast<void (*)(int)>(fn)(sig);
    // (seq_cst, as the waiter's side: a waiter that this run does not see counted in g_pausing
    // or whose slot it finds without an eventfd read the count after this increment.)
    g_handler_runs.fetch_add(1);
    if (g_pausing.load() > 0) {
        const uint64_t one = 1;
        for (wait_slot& w : g_slots) {
            if (!w.busy.load()) continue;
            const int fd = w.fd.load();
            if (fd >= 0) (void)sys::write(fd, &one, sizeof one, -1);  // (a system call)
        }
    }
    --t_handler_depth;
}

// sigsuspend's masks on one vCPU thread, which every fiber there shares: the mask the thread
// had before the first of them began, restored when the last one leaves (each restoring the
// mask it found undid the others': the second found the first's sigsuspend mask). While
// several wait, a signal unblocked by any of their masks is unblocked.
struct suspend_masks {
    int waiting = 0;
    sigset_t before;
};
__attribute__((tls_model("initial-exec"))) thread_local suspend_masks t_suspend;

bool is_handler(const struct sigaction* a) {
    return (a->sa_flags & SA_SIGINFO) ? a->sa_sigaction != nullptr
                                      : a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN;
}

// pause and sigsuspend for a fiber: parks it until one of the program's handlers has run, on
// any thread (the kernel may run it on another vCPU's, which a fiber cannot tell from its own)
// since the call began. With a mask (sigsuspend), the vCPU thread has that mask while the fiber
// waits. Errors: always -1 with EINTR, as pause and sigsuspend; EAGAIN or ENOMEM if no eventfd
// can be made; with every slot busy, the fiber looks for a handler run every 10 ms instead.
int wait_for_handler(const sigset_t* mask) {
    g_pausing.fetch_add(1);
    wait_slot* slot = nullptr;
    for (wait_slot& w : g_slots) {
        bool idle = false;
        if (w.busy.compare_exchange_strong(idle, true)) {
            slot = &w;
            break;
        }
    }
    if (slot && slot->fd.load() < 0) {
        const long made = sys::eventfd(0, EFD_CLOEXEC);
        if (made < 0) {
            slot->busy.store(false);
            g_pausing.fetch_sub(1);
            errno = static_cast<int>(-made);
            return -1;
        }
        slot->fd.store(static_cast<int>(made));
    }
    const uint64_t seen = g_handler_runs.load();
    if (mask) {
        if (t_suspend.waiting++ == 0) {
            pthread_sigmask(SIG_SETMASK, mask, &t_suspend.before);  // (a pending signal is taken here)
        } else {
            sigset_t cur, both;
            pthread_sigmask(SIG_SETMASK, nullptr, &cur);
            sigandset(&both, &cur, mask);  // blocked only where both block
            pthread_sigmask(SIG_SETMASK, &both, nullptr);
        }
    }
    const int saved = errno;
    while (g_handler_runs.load() == seen) {
        if (slot) {
            uint64_t v;
            if (gluon::posix::read(slot->fd.load(), &v, sizeof v) < 0 && errno != EINTR) break;
        } else {
            const timespec ten_ms{0, 10'000'000};
            (void)gluon::posix::nanosleep(&ten_ms, nullptr);
        }
    }
    errno = saved;
    if (mask && --t_suspend.waiting == 0) pthread_sigmask(SIG_SETMASK, &t_suspend.before, nullptr);
    if (slot) slot->busy.store(false);
    g_pausing.fetch_sub(1);
    errno = EINTR;
    return -1;
}

// sigaction for the program: a handler goes in behind the trampoline.
int install(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
    struct sigaction mine;
    const struct sigaction* give = act;
    const bool wrap = act && is_handler(act);
    if (wrap) {
        mine = *act;
        mine.sa_flags |= SA_SIGINFO;
        mine.sa_sigaction = trampoline;
        give = &mine;
    }
    // The previous handler is read before the new one is published, and reported as the
    // program gave it.
    void* prev_fn = g_handlers[sig].fn.load(std::memory_order_acquire);
    const bool prev_siginfo = g_handlers[sig].siginfo.load(std::memory_order_relaxed);
    if (wrap) {
        g_handlers[sig].siginfo.store((act->sa_flags & SA_SIGINFO) != 0, std::memory_order_relaxed);
        g_handlers[sig].fn.store(act->sa_flags & SA_SIGINFO ? reinterpret_cast<void*>(act->sa_sigaction)
                                                            : reinterpret_cast<void*>(act->sa_handler),
                                 std::memory_order_release);
    }
    const int r = GLUON_REAL(sigaction)(sig, give, old);
    if (r != 0) return r;
    if (old && (old->sa_flags & SA_SIGINFO) && old->sa_sigaction == trampoline) {
        if (prev_siginfo) {
            old->sa_sigaction = reinterpret_cast<void (*)(int, siginfo_t*, void*)>(prev_fn);
        } else {
            old->sa_flags &= ~SA_SIGINFO;
            old->sa_handler = reinterpret_cast<void (*)(int)>(prev_fn);
        }
    }
    return 0;
}

// A disposition as the signal() family returns it.
sighandler_t as_given(const struct sigaction& a) noexcept {
    if (a.sa_flags & SA_SIGINFO) return reinterpret_cast<sighandler_t>(reinterpret_cast<void*>(a.sa_sigaction));
    return a.sa_handler;
}

// The signal()-style installers (signal, bsd_signal, ssignal, sysv_signal, sigset) for the
// program: handler goes in as install() puts it (behind the trampoline), with flags and, if
// mask_self, sig blocked while it runs. glibc's own versions call an internal sigaction that no
// interposer sees, so a handler installed by them ran without the trampoline: its write() to a
// self-pipe parked "the current fiber" from inside the handler. Returns the previous handler as
// the program gave it. Errors: EINVAL (sig out of range, handler SIG_ERR), those of sigaction.
sighandler_t install_simple(int sig, sighandler_t handler, int flags, bool mask_self) noexcept {
    if (sig <= 0 || sig >= NSIG || handler == SIG_ERR) {
        errno = EINVAL;
        return SIG_ERR;
    }
    struct sigaction act {}, old {};
    act.sa_handler = handler;
    sigemptyset(&act.sa_mask);
    if (mask_self) sigaddset(&act.sa_mask, sig);
    act.sa_flags = flags;
    if (install(sig, &act, &old) != 0) return SIG_ERR;
    return as_given(old);
}

// The handler of sig as the program gave it (SIG_ERR if sigaction fails).
sighandler_t current_handler(int sig) noexcept {
    struct sigaction old {};
    if (install(sig, nullptr, &old) != 0) return SIG_ERR;
    return as_given(old);
}

}  // namespace

bool in_signal_handler() noexcept { return t_handler_depth > 0; }

// A handler may leave by a long jump (back to a sigsetjmp before the signal): the thread is no
// longer in a handler, whatever depth it was at. The jump functions clear it, then jump.
void left_handlers() noexcept { t_handler_depth = 0; }

}  // namespace gluon::preload

using namespace gluon::preload;

extern "C" {

int sigaction(int sig, const struct sigaction* act, struct sigaction* old) noexcept {
    // (gluon's own handlers, such as its stack-overflow report, are installed as they are.)
    if (current_mode() != mode::fibers || sig <= 0 || sig >= NSIG || own_code(__builtin_return_address(0)))
        return GLUON_REAL(sigaction)(sig, act, old);
    return install(sig, act, old);
}

[[noreturn]] void longjmp(jmp_buf env, int val) noexcept {
    left_handlers();
    GLUON_REAL(longjmp)(env, val);
    __builtin_unreachable();
}
[[noreturn]] void _longjmp(jmp_buf env, int val) noexcept {
    left_handlers();
    GLUON_REAL(_longjmp)(env, val);
    __builtin_unreachable();
}
[[noreturn]] void siglongjmp(sigjmp_buf env, int val) noexcept {
    left_handlers();
    GLUON_REAL(siglongjmp)(env, val);
    __builtin_unreachable();
}
// (What longjmp becomes under _FORTIFY_SOURCE.)
[[noreturn]] void __longjmp_chk(jmp_buf env, int val) noexcept {
    left_handlers();
    static auto* real_chk = real<void (*)(jmp_buf, int)>("__longjmp_chk");
    real_chk(env, val);
    __builtin_unreachable();
}

int pause() {
    if (!program_fiber()) return GLUON_REAL(pause)();
    return wait_for_handler(nullptr);
}
int sigsuspend(const sigset_t* mask) {
    if (!program_fiber()) return GLUON_REAL(sigsuspend)(mask);
    return wait_for_handler(mask);
}

#define GLUON_SIGNAL_PASSED_ON() (current_mode() != mode::fibers || own_code(__builtin_return_address(0)))

// glibc's signal() and its other names, bsd_signal and ssignal: BSD semantics (the handler
// stays, the signal is blocked while it runs, interrupted calls restart), installed as
// sigaction does. Errors: EINVAL, those of sigaction.
sighandler_t signal(int sig, sighandler_t handler) noexcept {
    if (GLUON_SIGNAL_PASSED_ON()) return GLUON_REAL(signal)(sig, handler);
    return install_simple(sig, handler, SA_RESTART, true);
}
sighandler_t bsd_signal(int sig, sighandler_t handler) noexcept {
    if (GLUON_SIGNAL_PASSED_ON()) return GLUON_REAL(bsd_signal)(sig, handler);
    return install_simple(sig, handler, SA_RESTART, true);
}
sighandler_t ssignal(int sig, sighandler_t handler) noexcept {
    if (GLUON_SIGNAL_PASSED_ON()) return GLUON_REAL(ssignal)(sig, handler);
    return install_simple(sig, handler, SA_RESTART, true);
}

// System V's signal(): the disposition goes back to SIG_DFL as the handler starts, the signal
// is not blocked while it runs, interrupted calls fail with EINTR. (__sysv_signal is what
// signal() becomes in a program compiled with _XOPEN_SOURCE and without _DEFAULT_SOURCE.)
// Errors: EINVAL, those of sigaction.
sighandler_t sysv_signal(int sig, sighandler_t handler) noexcept {
    if (GLUON_SIGNAL_PASSED_ON()) return GLUON_REAL(sysv_signal)(sig, handler);
    return install_simple(sig, handler, SA_RESETHAND | SA_NODEFER, false);
}
sighandler_t __sysv_signal(int sig, sighandler_t handler) noexcept {
    if (GLUON_SIGNAL_PASSED_ON()) return GLUON_REAL(__sysv_signal)(sig, handler);
    return install_simple(sig, handler, SA_RESETHAND | SA_NODEFER, false);
}

// System V's sigset(), as glibc does it: SIG_HOLD adds sig to the mask (of the calling thread:
// for a fiber, its vCPU's, as pthread_sigmask) and leaves the handler; any other disposition is
// installed (no flags, sig not blocked while the handler runs) and sig taken out of the mask.
// Returns SIG_HOLD if sig was blocked before, else the previous handler. Errors: EINVAL, those
// of sigaction.
sighandler_t sigset(int sig, sighandler_t disp) noexcept {
    if (GLUON_SIGNAL_PASSED_ON()) {
        static auto* real_sigset = real<sighandler_t (*)(int, sighandler_t)>("sigset");  // (deprecated in the header)
        return real_sigset(sig, disp);
    }
    if (sig <= 0 || sig >= NSIG || disp == SIG_ERR) {
        errno = EINVAL;
        return SIG_ERR;
    }
    sigset_t one, before;
    sigemptyset(&one);
    sigaddset(&one, sig);
    if (disp == SIG_HOLD) {
        if (const int e = pthread_sigmask(SIG_BLOCK, &one, &before); e != 0) {
            errno = e;
            return SIG_ERR;
        }
        return sigismember(&before, sig) ? SIG_HOLD : current_handler(sig);
    }
    const sighandler_t prev = install_simple(sig, disp, 0, false);
    if (prev == SIG_ERR) return SIG_ERR;
    if (const int e = pthread_sigmask(SIG_UNBLOCK, &one, &before); e != 0) {
        errno = e;
        return SIG_ERR;
    }
    return sigismember(&before, sig) ? SIG_HOLD : prev;
}

}  // extern "C"
