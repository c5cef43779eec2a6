// ipc::listener: accept, and each client's server handshake on a fiber of its own.
#include "gluon/ipc/listener.h"

#include <fcntl.h>
#include <sys/un.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <utility>

#include "gluon/common/spinlock.h"
#include "gluon/runtime/fiber.h"
#include "gluon/sync/semaphore.h"
#include "gluon/sys/ops.h"
#include "session_impl.h"

namespace gluon::ipc {

// What the listener's fibers share with it: they may outlive a listener that is closed or
// destroyed while a handshake is under way.
struct listener::state {
    net::listener l;
    session_options opts;
    std::shared_ptr<detail::region_registry> registry;
    spinlock lock;
    std::deque<result<session>> ready;  // handshakes done, well or not
    counting_semaphore ready_count;
    bool accepting = false;  // the accepting fiber has been started (by accept's caller)
    std::atomic<bool> closed{false};

    void push(result<session> r) {
        {
            std::lock_guard g(lock);
            ready.push_back(std::move(r));
        }
        ready_count.release();
    }
};

void listener::handshake(std::shared_ptr<state> st, net::stream sock) {
    auto si = detail::server_handshake(std::move(sock), st->opts, st->registry);
    if (!si) return st->push(unexpected(si.error()));
    (*si)->start_reader();
    st->push(session(std::move(*si)));
}

// Accepts until the listener is closed; each connection's handshake on a fiber of its own.
void listener::accept_loop(std::shared_ptr<state> st) {
    for (;;) {
        auto s = st->l.accept();
        if (!s) {
            const bool over = st->closed || s.error() == std::errc::bad_file_descriptor ||
                              s.error() == std::errc::invalid_argument;
            st->push(unexpected(s.error()));
            if (over) return;
            (void)this_fiber::sleep_for(std::chrono::milliseconds(10));  // (EMFILE: let fds free up)
            continue;
        }
        auto f = spawn(handshake, st, std::move(*s));
        if (!f) st->push(unexpected(f.error()));
        else (void)f->detach();
    }
}

result<listener> listener::listen(const net::address& addr, const session_options& opts, bool replace) {
    if (replace && addr.family() == AF_UNIX) {
        const auto* un = reinterpret_cast<const sockaddr_un*>(addr.data());
        if (un->sun_path[0] != '\0') (void)sys::unlinkat(AT_FDCWD, un->sun_path, 0);
    }
    listener l;
    l.st_ = std::make_shared<state>();
    l.st_->l = GLUON_TRY(net::listener::listen(addr));
    l.st_->opts = opts;
    l.st_->registry = std::make_shared<detail::region_registry>();
    return l;
}

listener& listener::operator=(listener&& o) noexcept {
    if (this != &o) {
        (void)close();
        st_ = std::move(o.st_);
    }
    return *this;
}

listener::~listener() { (void)close(); }

result<session> listener::accept(duration timeout) {
    if (!st_) return errno_error(EBADF);
    if (st_->closed) {
        if (!st_->ready_count.try_acquire()) return errno_error(EBADF);
    } else {
        bool start = false;
        {
            std::lock_guard g(st_->lock);
            start = !std::exchange(st_->accepting, true);
        }
        if (start) {
            auto f = spawn(accept_loop, st_);
            if (!f) {
                std::lock_guard g(st_->lock);
                st_->accepting = false;
                return unexpected(f.error());
            }
            (void)f->detach();
        }
        GLUON_TRY(st_->ready_count.acquire(timeout));
    }
    std::lock_guard g(st_->lock);
    result<session> r = std::move(st_->ready.front());
    st_->ready.pop_front();
    return r;
}

result<void> listener::close() noexcept {
    if (!st_ || st_->closed) return {};
    st_->closed = true;
    return st_->l.close();
}

net::listener& listener::socket() noexcept { return st_->l; }

}  // namespace gluon::ipc
