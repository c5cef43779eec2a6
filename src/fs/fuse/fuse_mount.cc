// Mounting, the reader fibers that take requests off /dev/fuse, and unmounting.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <mutex>
#include <sstream>
#include <vector>

#include "fuse_state.h"
#include "gluon/runtime/fd.h"
#include "gluon/runtime/signals.h"
#include "gluon/runtime/vcpu.h"
#include "gluon/sys/ops.h"

namespace gluon::fs {
namespace {

bool in_path(const std::string& prog) {
    const char* path = std::getenv("PATH");
    std::stringstream dirs(std::string(path ? path : "/usr/bin:/bin") + ":/usr/sbin:/sbin");
    for (std::string d; std::getline(dirs, d, ':');)
        if (!d.empty() && sys::faccessat(AT_FDCWD, (d + "/" + prog).c_str(), X_OK) == 0) return true;
    return false;
}

double seconds(duration d) { return std::chrono::duration<double>(d).count(); }

/// Takes requests off the device until it is unmounted or the mount stops. Every reader reads
/// the one fd: the kernel hands each request to one of them.
void reader(fuse_mount::state* s) {
    std::unique_ptr<char[]> buf(new (std::nothrow) char[s->bufsize]);
    while (buf && !s->stopping.load(std::memory_order_acquire)) {
        // One read through the engine: on io_uring a single submission that completes when a
        // request arrives (the ring polls the device itself).
        auto r = fd::read_some(s->fd, buf.get(), s->bufsize);
        long n = r ? static_cast<long>(*r) : -r.error().value();
        if (n == -EAGAIN || n == -EINTR || n == -ENOENT) continue;  // ENOENT: interrupted before it was read
        if (n <= 0) break;  // ENODEV: unmounted; ECANCELED: stopping
        fuse_buf fb{};
        fb.mem = buf.get();
        fb.size = static_cast<size_t>(n);
        detail::device_read();
        fuse_session_process_buf(s->se, &fb);
    }
    std::lock_guard g(s->m);
    if (--s->readers_alive == 0) s->ended = true;
    s->changed.notify_all();
}

}  // namespace

void fuse_mount::state::request_done() noexcept {
    // Under m: stop() reads the count under m too, so it cannot see the last request gone and
    // free the state between this decrement and the notify (which then locked a freed m).
    std::lock_guard g(m);
    if (in_flight.fetch_sub(1) == 1 && stopping.load()) changed.notify_all();
}

fuse_mount::fuse_mount(std::unique_ptr<state> s) noexcept : s_(std::move(s)) {}

fuse_mount::~fuse_mount() { stop(); }

result<std::unique_ptr<fuse_mount>> fuse_mount::mount(std::shared_ptr<filesystem> fs, fuse_options opts) {
    if (!is_vcpu()) return errno_error(EPERM);
    if (!fs) return errno_error(EINVAL);
    if (sys::faccessat(AT_FDCWD, "/dev/fuse", R_OK | W_OK) != 0) return errno_error(ENODEV);
    if (::geteuid() != 0 && !in_path("fusermount3")) return errno_error(ENOENT);
    struct statx mp{};
    if (long r = sys::statx(AT_FDCWD, opts.mountpoint.c_str(), 0, STATX_TYPE, &mp); r < 0)
        return errno_error(static_cast<int>(-r));
    if (!S_ISDIR(mp.stx_mode)) return errno_error(ENOTDIR);

    auto s = std::make_unique<state>();
    s->fs = std::move(fs);
    s->opts = std::move(opts);
    s->attr_timeout = seconds(s->opts.attr_timeout);
    s->entry_timeout = seconds(s->opts.entry_timeout);
    std::string o = "fsname=" + s->opts.fsname + ",subtype=gluon,default_permissions";
    if (s->opts.read_only) o += ",ro";
    if (s->opts.allow_other) o += ",allow_other";
    std::vector<std::string> argv_s = {"gluon", "-o", o};
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
    s->se = fuse_session_new(&args, &detail::fuse_ops(), sizeof(fuse_lowlevel_ops), s.get());
    fuse_opt_free_args(&args);  // libfuse may have copied them into memory of its own
    if (!s->se) return errno_error(EIO);
    if (fuse_session_mount(s->se, s->opts.mountpoint.c_str()) != 0) {
        fuse_session_destroy(s->se);
        return errno_error(EIO);
    }
    s->fd = fuse_session_fd(s->se);
    (void)sys::set_nonblocking(s->fd);
    // The largest request: a write of max_write (libfuse's default, 1 MiB) plus its headers.
    s->bufsize = (1 << 20) + 2 * static_cast<size_t>(::getpagesize());
    std::unique_ptr<fuse_mount> m(new fuse_mount(std::move(s)));
    if (auto r = m->serve_here(); !r) {
        m->stop();
        return unexpected(r.error());
    }
    return m;
}

result<void> fuse_mount::serve_here() {
    if (!is_vcpu()) return errno_error(EPERM);
    std::lock_guard g(s_->m);
    if (s_->stopping || s_->ended) return errno_error(ESHUTDOWN);
    auto f = GLUON_TRY(spawn(reader, s_.get()));
    ++s_->readers_alive;
    s_->readers.push_back(std::move(f));
    return {};
}

void fuse_mount::stop() noexcept {
    if (!s_) return;
    {
        std::unique_lock g(s_->m);
        if (s_->stopped) return;
        s_->stopped = true;
        s_->stopping = true;
        for (auto& f : s_->readers) (void)f.interrupt();
        s_->changed.wait(g, [&] { return s_->readers_alive == 0; });
        // Requests in flight answer before the session goes (their replies need it).
        s_->changed.wait(g, [&] { return s_->in_flight.load() == 0; });
        for (auto& f : s_->readers)
            if (f.joinable()) (void)f.detach();
        s_->readers.clear();
        s_->ended = true;
        s_->changed.notify_all();
    }
    // libfuse closes the fd itself: the engine forgets it first.
    fd::closing(s_->fd);
    fuse_session_unmount(s_->se);
    fuse_session_destroy(s_->se);
    s_->se = nullptr;
}

result<void> fuse_mount::wait() {
    std::unique_lock g(s_->m);
    while (!s_->ended)
        if (long r = s_->changed.wait_interruptible(g); r < 0) return errno_error(static_cast<int>(-r));
    return {};
}

result<void> fuse_mount::run_until_signalled(const std::function<void()>& ready) {
    // One fiber waits for the signals, this one for the mount to end; whichever comes first
    // ends the other. ready and failed outlive the watcher: it is joined before this returns.
    // A wait for the signals that fails (EBUSY: another waiter has them) ends the mount too,
    // as a signal would: waiting on, no signal could end it. Its error is kept only if it
    // came before the mount ended (the interrupt below makes the wait fail too).
    std::error_code failed;
    auto watcher = spawn([this, &ready, &failed] {
        auto sig = wait_for_signals({SIGINT, SIGTERM}, forever, ready);
        std::lock_guard g(s_->m);
        if (!sig && !s_->ended) failed = sig.error();
        s_->ended = true;
        s_->changed.notify_all();
    });
    if (!watcher) return unexpected(watcher.error());
    auto r = wait();
    (void)watcher->interrupt();
    (void)watcher->join();
    stop();
    if (!r) return r;
    if (failed) return unexpected(failed);
    return {};
}

const std::string& fuse_mount::mountpoint() const noexcept { return s_->opts.mountpoint; }

fuse_stats fuse_mount::statistics() const noexcept {
    return {s_->requests.load(), s_->in_flight.load(), s_->bytes_read.load(), s_->bytes_written.load()};
}

}  // namespace gluon::fs
