#include "gluon/net/server.h"

#include <chrono>

#include "gluon/common/intrusive_list.h"
#include "gluon/common/log.h"
#include "gluon/runtime/fiber.h"
#include "gluon/runtime/oneshot.h"
#include "gluon/runtime/vcpu_call.h"
#include "gluon/sync/semaphore.h"

namespace gluon::net {

struct server::conn {
    fiber f;
    list_hook hook;
};

struct server::state {
    fiber acceptor;
    intrusive_list<conn, &conn::hook> conns;
    event all_done{true};  // set while no handler runs
};

namespace {

// Work for a server's own vCPU from another thread: a call posted there starts a fiber that does
// it, and the caller waits. The handlers' list and counters are that vCPU's alone, and each
// handler frees its own entry when it ends; walking the list from another vCPU raced with that.
struct remote_stop : vcpu_call, vcpu_timer {
    server* srv = nullptr;
    duration grace{};
    bool whole = false;  // stop(grace), else stop_accepting()
    oneshot done;
};

void start_remote_stop(remote_stop* r) noexcept {
    auto f = spawn(fiber_options{.name = "server stop"}, [r] {
        if (r->whole)
            r->srv->stop(r->grace);
        else
            r->srv->stop_accepting();
        r->done.signal();  // the caller frees r: not touched after this
    });
    if (f) {
        (void)f->detach();
        return;
    }
    // No stack now: try again shortly (only a fiber of this vCPU can stop the server).
    (void)static_cast<vcpu_timer*>(r)->arm(deadline_after(std::chrono::milliseconds(10)),
                                           [](vcpu_timer* t) noexcept { start_remote_stop(static_cast<remote_stop*>(t)); });
}

void stop_on(vcpu_handle owner, server* srv, duration grace, bool whole) noexcept {
    remote_stop r;
    r.srv = srv;
    r.grace = grace;
    r.whole = whole;
    r.fn = [](vcpu_call* c) noexcept { start_remote_stop(static_cast<remote_stop*>(c)); };
    if (!post_call(owner, r)) return;
    r.done.wait();
}

}  // namespace

result<std::unique_ptr<server>> server::start(const address& addr, handler h, const server_options& opts) {
    if (!is_vcpu()) return errno_error(EPERM);
    auto l = GLUON_TRY(listener::listen(addr, opts));
    std::unique_ptr<server> s(new server);
    auto local = GLUON_TRY(l.local_address());
    s->local_ = local;
    s->listener_ = std::move(l);
    s->handler_ = std::move(h);
    s->wrap_ = opts.wrap;
    s->owner_ = vcpu_handle::current();
    s->nodelay_ = opts.nodelay && addr.family() != AF_UNIX;
    s->read_ahead_ = opts.read_ahead;
    s->st_ = std::make_unique<state>();
    s->st_->acceptor =
        GLUON_TRY(spawn(fiber_options{.name = "accept"}, [srv = s.get()] { srv->accept_loop(); }));
    return s;
}

server::~server() { stop(duration::zero()); }

void server::accept_loop() {
    while (!stopping_) {
        auto c = listener_.accept();
        if (!c) {
            const auto e = c.error();
            if (e == std::errc::operation_canceled || stopping_) return;
            if (e == std::errc::too_many_files_open || e == std::errc::too_many_files_open_in_system ||
                e == std::errc::not_enough_memory || e == std::errc::no_buffer_space) {
                GLUON_LOG_RATE_LIMITED(warn, std::chrono::seconds(1),
                                       "gluon: accept on {}: {}; backing off", local_.to_string(), e.message());
                (void)this_fiber::sleep_for(std::chrono::milliseconds(10));
                continue;
            }
            if (e == std::errc::connection_aborted || e == std::errc::protocol_error) continue;
            GLUON_LOG_RATE_LIMITED(error, std::chrono::seconds(1), "gluon: accept on {}: {}",
                                   local_.to_string(), e.message());
            (void)this_fiber::sleep_for(std::chrono::milliseconds(10));
            continue;
        }
        if (read_ahead_) c->read_ahead();
        accepted_.fetch_add(1, std::memory_order_relaxed);
        if (nodelay_) (void)c->set_nodelay(true);
        auto* k = new conn;
        st_->conns.push_back(*k);
        if (active_.fetch_add(1, std::memory_order_relaxed) == 0) st_->all_done.reset();
        auto f = spawn([this, k, s = std::move(*c)]() mutable {
            serve(s);
            st_->conns.erase(*k);
            delete k;  // detaches our own handle
            if (active_.fetch_sub(1, std::memory_order_relaxed) == 1) st_->all_done.set();
        });
        if (f) {
            k->f = std::move(*f);
        } else {  // no stack: drop this connection, keep serving the others
            st_->conns.erase(*k);
            delete k;
            if (active_.fetch_sub(1, std::memory_order_relaxed) == 1) st_->all_done.set();
            GLUON_LOG_RATE_LIMITED(warn, std::chrono::seconds(1), "gluon: no fiber for a connection: {}",
                                   f.error().message());
        }
    }
}

void server::serve(stream& s) {
    if (!wrap_) {
        handler_(s);
        (void)s.close();
        return;
    }
    auto wrapped = wrap_(std::move(s));
    if (!wrapped) {
        wrap_failures_.fetch_add(1, std::memory_order_relaxed);
        GLUON_LOG_RATE_LIMITED(debug, std::chrono::seconds(1), "gluon: connection on {} dropped: {}",
                               local_.to_string(), wrapped.error().message());
        return;
    }
    handler_(**wrapped);
    (void)(*wrapped)->close();
}

void server::stop_accepting() noexcept {
    if (!st_) return;
    if (vcpu_handle::current() != owner_) return stop_on(owner_, this, duration::zero(), false);
    if (stopping_) return;
    stopping_ = true;
    if (st_->acceptor.joinable()) {
        (void)st_->acceptor.interrupt();
        (void)st_->acceptor.join();
    }
    (void)listener_.close();
}

void server::stop(duration grace) noexcept {
    if (!st_) return;
    if (vcpu_handle::current() != owner_) return stop_on(owner_, this, grace, true);
    stop_accepting();
    if (st_->all_done.wait(grace)) return;
    st_->conns.for_each([](conn& k) { (void)k.f.interrupt(); });
    (void)st_->all_done.wait();
}

}  // namespace gluon::net
