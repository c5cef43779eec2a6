// libcurl's socket interface on gluon's event engine (ADR 0008).
//
// libcurl tells us which sockets to watch (on_socket) and when it next needs a timeout call
// (on_timer). Each watched socket gets a poll op submitted straight to the vCPU's engine; its
// completion, which runs inside the engine's dispatch, only records the events and wakes the
// driver fiber. Only the driver calls curl_multi_socket_action, so libcurl is never entered
// from the engine's dispatch and never re-entered. Fibers calling perform() add and remove
// their own easy handles (libcurl is not running then: fibers of a vCPU never overlap) and park
// until the driver reports CURLMSG_DONE.
#include "multi.h"

#include <poll.h>

#include <new>
#include <utility>

#include "gluon/common/misuse.h"
#include "gluon/net/curl.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/vcpu.h"

namespace gluon::net::curl::detail {

namespace {

// The multi of this thread's current vCPU; cleared by the driver when the vCPU shuts down, so
// a vCPU started again on the same thread gets a fresh one.
thread_local multi* t_multi = nullptr;

// OpenSSL handshakes run on the driver's stack: give it room.
constexpr size_t k_driver_stack = size_t{512} * 1024;

short poll_events_for(int what) noexcept {
    switch (what) {
    case CURL_POLL_IN:
        return POLLIN;
    case CURL_POLL_OUT:
        return POLLOUT;
    case CURL_POLL_INOUT:
        return POLLIN | POLLOUT;
    default:
        return 0;
    }
}

// A poll op's result as events. An error (-errno) is reported as POLLERR: libcurl then finds
// the socket's error itself when it next uses the socket.
short revents_of(long r) noexcept {
    return r >= 0 ? static_cast<short>(r) : static_cast<short>(POLLERR);
}

int cselect_for(short revents) noexcept {
    int ev = 0;
    if (revents & (POLLIN | POLLPRI | POLLHUP | POLLRDHUP)) ev |= CURL_CSELECT_IN;
    if (revents & POLLOUT) ev |= CURL_CSELECT_OUT;
    if (revents & (POLLERR | POLLNVAL)) ev |= CURL_CSELECT_ERR;
    return ev;
}

} // namespace

multi* multi::for_current_vcpu(std::error_code& err) noexcept {
    if (t_multi) return t_multi;
    engine::engine* eng = current_engine();
    if (!eng) {
        err = errno_code(EPERM);
        return nullptr;
    }
    CURLM* h = curl_multi_init();
    auto* m = h ? new (std::nothrow) multi(h, eng) : nullptr;
    if (!m) {
        if (h) curl_multi_cleanup(h);
        err = errno_code(ENOMEM);
        return nullptr;
    }
    curl_multi_setopt(h, CURLMOPT_SOCKETFUNCTION, &multi::on_socket);
    curl_multi_setopt(h, CURLMOPT_SOCKETDATA, m);
    curl_multi_setopt(h, CURLMOPT_TIMERFUNCTION, &multi::on_timer);
    curl_multi_setopt(h, CURLMOPT_TIMERDATA, m);
    // The handle is dropped (detached): the driver ends by itself when the vCPU shuts down.
    auto f = spawn(fiber_options{.stack_size = k_driver_stack, .name = "curl-multi"}, [m] {
        m->driver_id_ = this_fiber::id();
        m->drive();
    });
    if (!f) {
        delete m;
        err = f.error();
        return nullptr;
    }
    t_multi = m;
    return m;
}

multi::~multi() {
    if (handle_) curl_multi_cleanup(handle_);
    while (watch* w = watches_.pop_front())
        delete w;
}

// --- fibers calling perform() ---------------------------------------------------------------

std::error_code multi::run(CURL* easy, deadline_t deadline, CURLcode& code) noexcept {
    if (this_fiber::id() == driver_id_) {
        gluon::detail::report_misuse("gluon::net::curl::perform called from a libcurl callback");
        return errno_code(EDEADLK);
    }
    if (CURLMcode mc = curl_multi_add_handle(handle_, easy); mc != CURLM_OK)
        return {static_cast<int>(mc), multi_category()};
    transfer t;
    t.easy = easy;
    try {
        transfers_.emplace(easy, &t);
    } catch (...) {  // std::bad_alloc: nothing else can come out of emplace
        curl_multi_remove_handle(handle_, easy);
        return errno_code(ENOMEM);
    }
    t.lk.lock();
    t.q.push_back(t.w);
    const long r = park(t.lk, t.w, {.deadline = deadline});
    // A transfer that finished before the timeout or interrupt took effect keeps its result:
    // the data has arrived and must not be reported as lost.
    if (r == 0 || t.st == transfer::state::finished) {
        code = t.code;
        if (r == -ECANCELED) gluon::restore_interrupt();  // it did not take effect: keep it pending
        return {};
    }
    if (t.st == transfer::state::running) {
        // We time out or are interrupted while libcurl still owns the handle: take it back. The
        // driver is parked (we are running), so libcurl is not inside a call.
        transfers_.erase(easy);
        curl_multi_remove_handle(handle_, easy);
    }
    // detached: the multi shut down and already removed the handle (it may be gone by now).
    return errno_code(static_cast<int>(-r));
}

// Wakes the fiber of t unless its timeout or interrupt got there first (whoever unlinks the
// waiter owns the wake-up). t may be gone once the fiber runs: nothing touches it after wake.
void multi::finish(transfer& t, long result) noexcept {
    t.lk.lock();
    const bool linked = t.w.hook.linked();
    if (linked) waiter_list::unlink(t.w);
    t.lk.unlock();
    if (linked) wake(t.w, result);
}

// --- libcurl callbacks (inside libcurl calls; they must not park) ----------------------------

int multi::on_socket(CURL*, curl_socket_t s, int what, void* self, void* socketp) noexcept {
    auto* m = static_cast<multi*>(self);
    auto* w = static_cast<watch*>(socketp);
    if (what == CURL_POLL_REMOVE) {
        if (!w) return 0;
        w->removed = true;
        w->want = 0;
        if (m->handle_) curl_multi_assign(m->handle_, s, nullptr);
        if (w->ready_hook.linked()) m->ready_.erase(*w);
        if (w->in_flight) m->eng_->cancel(w->op, ECANCELED);
        // libcurl closes its sockets with close(2) after this call (or parks them in its
        // connection cache, unwatched): let the engine drop per-fd state (epoll registrations)
        // now, or a new socket that reuses the fd number would inherit it.
        m->eng_->forget_fd(s, false);
        return 0;
    }
    if (!m->handle_) return 0;  // inside curl_multi_cleanup at shutdown
    if (!w) {
        w = new (std::nothrow) watch;
        if (!w) return -1;  // libcurl fails the transfer
        w->owner = m;
        w->fd = s;
        m->watches_.push_back(*w);
        curl_multi_assign(m->handle_, s, w);
    }
    const short want = poll_events_for(what);
    if (want == w->want) return 0;
    w->want = want;
    // A poll for the old interest may never fire (or fire forever): replace it. Its cancelled
    // completion re-queues the watch, and the driver re-arms it with the new interest.
    if (w->in_flight)
        m->eng_->cancel(w->op, ECANCELED);
    else
        m->arm(*w);
    return 0;
}

int multi::on_timer(CURLM*, long timeout_ms, void* self) noexcept {
    auto* m = static_cast<multi*>(self);
    m->timer_ =
        timeout_ms < 0 ? k_no_deadline : deadline_after(std::chrono::milliseconds(timeout_ms));
    m->notify();
    return 0;
}

// --- engine side ---------------------------------------------------------------------------

void multi::arm(watch& w) noexcept {
    if (w.removed || w.in_flight || w.want == 0 || w.ready_hook.linked()) return;
    w.op = engine::io_op::poll(w.fd, static_cast<short>(w.want));
    w.op.on_complete = &multi::on_poll;
    w.op.user = &w;
    const long r = eng_->submit(w.op);
    if (r == engine::engine::pending) {
        w.in_flight = true;
        ++in_flight_;
        return;
    }
    w.revents = static_cast<short>(w.revents | revents_of(r));
    queue(w);
}

// Runs inside the engine's dispatch (or inside cancel() on engines that cancel synchronously):
// record and wake the driver; never call libcurl or submit from here.
void multi::on_poll(engine::io_op* op, long result) noexcept {
    auto* w = static_cast<watch*>(op->user);
    multi* m = w->owner;
    w->in_flight = false;
    --m->in_flight_;
    if (result != -ECANCELED) w->revents = static_cast<short>(w->revents | revents_of(result));
    // Even without events: the driver re-arms a watch whose poll was replaced.
    if (!w->removed) m->queue(*w);
    m->notify();
}

void multi::queue(watch& w) noexcept {
    if (!w.ready_hook.linked()) ready_.push_back(w);
    notify();
}

void multi::notify() noexcept {
    poked_ = true;
    lk_.lock();
    waiter* w = sleeper_.pop_front();
    lk_.unlock();
    if (w) wake(*w, 0);
}

long multi::sleep_until(deadline_t deadline) noexcept {
    if (std::exchange(poked_, false)) return 0;
    waiter w;
    lk_.lock();
    sleeper_.push_back(w);
    const long r = park(lk_, w, {.deadline = deadline});
    poked_ = false;
    return r;
}

// --- the driver fiber ----------------------------------------------------------------------

void multi::drive() noexcept {
    for (;;) {
        dispatch_ready();
        if (timer_ != k_no_deadline && timer_ <= mono_now_ns()) {
            timer_ = k_no_deadline;  // libcurl sets a new one from inside the call if it needs it
            action(CURL_SOCKET_TIMEOUT, 0);
        }
        sweep();
        if (!ready_.empty() || (timer_ != k_no_deadline && timer_ <= mono_now_ns())) {
            this_fiber::yield();  // more work at once: still let the vCPU's other fibers run
            continue;
        }
        // An interrupt reaches this fiber only from gluon::fini (nobody else has its handle).
        if (sleep_until(timer_) == -ECANCELED) break;
    }
    shutdown();
}

void multi::dispatch_ready() noexcept {
    while (watch* w = ready_.pop_front()) {
        if (w->removed) continue;
        const short ev = std::exchange(w->revents, 0);
        if (ev) action(w->fd, cselect_for(ev));
        arm(*w);  // no-op if libcurl removed it or re-armed it meanwhile
    }
}

void multi::action(curl_socket_t s, int ev_bitmask) noexcept {
    int running = 0;
    // CURLM_BAD_SOCKET (an event for a socket libcurl has just dropped) needs no handling.
    (void)curl_multi_socket_action(handle_, s, ev_bitmask, &running);
    collect_done();
}

void multi::collect_done() noexcept {
    int left = 0;
    while (CURLMsg* msg = curl_multi_info_read(handle_, &left)) {
        if (msg->msg != CURLMSG_DONE) continue;
        CURL* easy = msg->easy_handle;
        const CURLcode code = msg->data.result;
        // msg is invalid once the handle is removed: copied above.
        curl_multi_remove_handle(handle_, easy);
        auto it = transfers_.find(easy);
        if (it == transfers_.end()) continue;
        transfer* t = it->second;
        transfers_.erase(it);
        t->code = code;
        t->st = transfer::state::finished;
        finish(*t, 0);
    }
}

void multi::sweep() noexcept {
    watches_.for_each([this](watch& w) {
        if (!w.removed || w.in_flight || w.ready_hook.linked()) return;
        watches_.erase(w);
        delete &w;
    });
}

// The vCPU is shutting down: hand every transfer back (ECANCELED), close libcurl's connections,
// wait for the engine to return our poll ops (io_uring cancels asynchronously: the ops must
// outlive their completions), then free everything.
void multi::shutdown() noexcept {
    if (t_multi == this) t_multi = nullptr;  // a perform() from now on starts a fresh multi
    for (auto& [easy, t] : transfers_) {
        curl_multi_remove_handle(handle_, easy);
        t->st = transfer::state::detached;
        finish(*t, -ECANCELED);
    }
    transfers_.clear();
    curl_multi_cleanup(std::exchange(handle_, nullptr));
    watches_.for_each([this](watch& w) {
        w.removed = true;
        if (w.in_flight) eng_->cancel(w.op, ECANCELED);
    });
    // gluon::fini interrupts us again every 100 ms until we are gone: just keep waiting.
    while (in_flight_ > 0)
        (void)sleep_until(k_no_deadline);
    delete this;
}

} // namespace gluon::net::curl::detail
