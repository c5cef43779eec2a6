#include "gluon/runtime/signals.h"

#include <fcntl.h>
#include <signal.h>

#include <atomic>

#include "gluon/runtime/fd.h"
#include "gluon/runtime/vcpu.h"
#include "gluon/sys/ops.h"
#include "gluon/sys/proc.h"

namespace gluon {
namespace {

// The pipe the handler reports to. The handler may run on any thread at any moment, even just
// after a wait ended: it only reads the write end and writes one byte (async-signal-safe). So the
// pipe, made on first use, is never closed: a late handler can never write to a reused fd number.
std::atomic<int> g_report_fd{-1};
int g_read_fd = -1;
std::atomic<bool> g_busy{false};

result<void> make_pipe_once() {
    if (g_read_fd >= 0) return {};
    int p[2];
    GLUON_TRY(void_from_syscall(sys::pipe2(p, O_CLOEXEC | O_NONBLOCK)));
    g_read_fd = p[0];
    g_report_fd.store(p[1], std::memory_order_release);
    return {};
}

// Bytes left by signals that came after an earlier wait had its answer.
void drain_stale(int fd) {
    unsigned char junk[64];
    while (sys::read(fd, junk, sizeof junk, -1) > 0) {
    }
}

extern "C" void report_signal(int sig) {
    const int saved = errno;
    int fd = g_report_fd.load(std::memory_order_acquire);
    if (fd >= 0) {
        unsigned char b = static_cast<unsigned char>(sig);
        (void)sys::write(fd, &b, 1, -1);  // a full pipe drops the byte: one is enough
    }
    errno = saved;
}

bool catchable(int sig) { return sig > 0 && sig < NSIG && sig != SIGKILL && sig != SIGSTOP; }

// Installs report_signal for the set and puts the earlier dispositions back on destruction.
class handlers {
public:
    result<void> install(std::initializer_list<int> sigs) {
        for (int s : sigs) {
            struct sigaction sa {};
            sa.sa_handler = report_signal;
            sigemptyset(&sa.sa_mask);
            sa.sa_flags = SA_RESTART;
            GLUON_TRY(void_from_syscall(sys::sigaction(s, &sa, &old_[n_].sa)));
            old_[n_++].sig = s;
        }
        return {};
    }
    ~handlers() {
        while (n_ > 0) {
            --n_;
            (void)sys::sigaction(old_[n_].sig, &old_[n_].sa, nullptr);
        }
    }

private:
    struct saved {
        int sig;
        struct sigaction sa;
    };
    saved old_[NSIG];
    int n_ = 0;
};

}  // namespace

result<int> wait_for_signals(std::initializer_list<int> sigs, duration timeout) {
    return wait_for_signals(sigs, timeout, {});
}

result<int> wait_for_signals(std::initializer_list<int> sigs, duration timeout, const std::function<void()>& ready) {
    if (!is_vcpu()) return errno_error(EPERM);
    if (sigs.size() == 0) return errno_error(EINVAL);
    for (int s : sigs)
        if (!catchable(s)) return errno_error(EINVAL);
    if (g_busy.exchange(true, std::memory_order_acquire)) return errno_error(EBUSY);
    struct release {
        ~release() { g_busy.store(false, std::memory_order_release); }
    } busy_guard;

    GLUON_TRY(make_pipe_once());
    drain_stale(g_read_fd);
    handlers h;
    GLUON_TRY(h.install(sigs));
    // Only now: a signal sent in answer to what ready() tells finds the handler.
    if (ready) ready();
    unsigned char b = 0;
    GLUON_TRY(fd::read_some(g_read_fd, &b, 1, timeout));
    return static_cast<int>(b);
}

}  // namespace gluon
