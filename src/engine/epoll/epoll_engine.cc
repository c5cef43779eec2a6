#include "epoll_engine.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>

#include "../exec.h"
#include "gluon/sys/ops.h"

namespace gluon::engine {
namespace {
constexpr uint64_t k_notify_tag = ~uint64_t{0};
constexpr uint32_t k_in_events = EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR | EPOLLPRI;
constexpr uint32_t k_out_events = EPOLLOUT | EPOLLHUP | EPOLLERR;
}  // namespace

result<std::unique_ptr<engine>> epoll_engine::create(const options&) {
    long epfd = sys::epoll_create(EPOLL_CLOEXEC);
    if (epfd < 0) return errno_error(static_cast<int>(-epfd));
    long evfd = sys::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (evfd < 0) {
        (void)sys::close(static_cast<int>(epfd));
        return errno_error(static_cast<int>(-evfd));
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLET;
    ev.data.u64 = k_notify_tag;
    if (long r = sys::epoll_ctl(static_cast<int>(epfd), EPOLL_CTL_ADD, static_cast<int>(evfd), &ev); r < 0) {
        (void)sys::close(static_cast<int>(evfd));
        (void)sys::close(static_cast<int>(epfd));
        return errno_error(static_cast<int>(-r));
    }
    return std::unique_ptr<engine>(new epoll_engine(static_cast<int>(epfd), static_cast<int>(evfd)));
}

epoll_engine::~epoll_engine() {
    for (auto* st : fds_) delete st;
    (void)sys::close(evfd_);
    (void)sys::close(epfd_);
}

epoll_engine::fd_state* epoll_engine::state_for(int fd) noexcept {
    if (fd < 0) return nullptr;
    auto idx = static_cast<size_t>(fd);
    if (idx >= fds_.size()) fds_.resize(idx + 64, nullptr);
    if (!fds_[idx]) fds_[idx] = new (std::nothrow) fd_state;
    return fds_[idx];
}

long epoll_engine::register_fd(int fd, fd_state& st) noexcept {
    if (long r = sys::set_nonblocking(fd); r < 0) return r;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLPRI | EPOLLET;
    ev.data.u64 = static_cast<uint64_t>(fd);
    if (long r = sys::epoll_ctl(epfd_, EPOLL_CTL_ADD, fd, &ev); r < 0) {
        // EPERM: a regular file or directory, which is always ready; the caller's syscall
        // then simply completes (blocking briefly, as the kernel does for such files).
        if (r == -EPERM) {
            st.registered = true;  // remembered, so we do not ask again on every operation
            return 0;
        }
        if (r != -EEXIST) return r;
    }
    st.registered = true;
    int type = 0;
    socklen_t len = sizeof type;
    st.stream = sys::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_STREAM;
    st.drained = false;
    st.hup = false;
    return 0;
}

namespace {

// A read of the byte stream itself (not a peek, which leaves the data queued).
bool consumes_input(const io_op& op) noexcept {
    return op.code == opcode::read ||
           ((op.code == opcode::recv || op.code == opcode::recv_pooled) && !(op.flags & MSG_PEEK));
}

}  // namespace

// Runs op now and notes whether a stream read emptied the socket (a short read or EAGAIN).
// Only small short reads count (request/response traffic): a stream's data keeps coming while
// its handler sends, so its next read usually finds some. (Unlike io_uring's POLL_FIRST, which
// guesses, this knows: no edge has come since the read; ADR 0010, decision 2.)
// Not once the peer has closed or an error is pending: the data before it can leave the queue
// empty while the end of stream (or the error) is still to be read, and no edge would follow.
long epoll_engine::exec_tracked(io_op& op, fd_state& st) noexcept {
    long r = op.code == opcode::recv_pooled ? recv_pooled(op) : detail::exec_now(op);
    const size_t asked = op.code == opcode::recv_pooled ? detail::buffer_pool::k_size : op.len;
    if (st.stream && !st.hup && consumes_input(op))
        st.drained = r == -EAGAIN || (r > 0 && static_cast<size_t>(r) < asked && r < 4096);
    return r;
}

// A recv into a free buffer of the pool, kept by the caller only if data came (-ENOBUFS: none
// is free).
long epoll_engine::recv_pooled(io_op& op) noexcept {
    if (long r = pool_.init(); r < 0) return r;
    long id = pool_.take();
    if (id < 0) return -ENOBUFS;
    char* b = pool_.at(static_cast<unsigned>(id));
    long r = sys::recv(op.fd, b, detail::buffer_pool::k_size, op.flags | MSG_DONTWAIT);
    if (r <= 0) {
        pool_.put(static_cast<unsigned>(id));
        op.buf = nullptr;
        return r;
    }
    op.buf = b;
    ++pool_.out;
    return r;
}

void epoll_engine::give_back(void* buf) noexcept {
    long id = pool_.id_of(buf);
    if (id < 0) return;
    --pool_.out;
    pool_.put(static_cast<unsigned>(id));
    if (io_op* w = buffer_waiters_.pop_front()) unparked_.push_back(*w);
}

// Runs again the recv_pooled ops that waited for a buffer.
int epoll_engine::run_unparked() noexcept {
    int n = 0;
    while (io_op* op = unparked_.pop_front()) {
        fd_state* st = state_for(op->fd);
        long r = st ? exec_tracked(*op, *st) : -ENOMEM;
        if (r == -EAGAIN) {
            st->readers.push_back(*op);
        } else if (r == -ENOBUFS) {
            buffer_waiters_.push_back(*op);
        } else {
            op->on_complete(op, r);
            ++n;
        }
    }
    return n;
}

long epoll_engine::submit(io_op& op) noexcept {
    op.engine_busy = false;
    op.cancel_errno = 0;
    if (op.code == opcode::nop) return 0;  // nothing to wait for
    // File and metadata ops have no readiness to wait for: they block briefly, like the kernel.
    if (op.code >= opcode::openat) {
        if (op.code == opcode::close) forget_fd(op.fd, true);
        return execute_blocking(op);
    }
    fd_state* st = state_for(op.fd);
    if (!st) return op.fd < 0 ? -EBADF : -ENOMEM;
    if (const uint32_t g = fd_generation(op.fd); !st->registered || st->gen != g) {
        // Closed (on any vCPU) since we registered it: this is another file now, and the
        // closed one's epoll registration went with it.
        if (st->registered) fail_waiters(op.fd, st);
        st->registered = false;
        if (long r = register_fd(op.fd, *st); r < 0) return r;
        st->gen = g;
    }
    // A read on a stream that the last read emptied waits for the next edge without trying.
    const bool wait_first = st->drained && consumes_input(op);
    if (!wait_first) {
        long r = exec_tracked(op, *st);
        if (r == -ENOBUFS && op.code == opcode::recv_pooled) {
            buffer_waiters_.push_back(op);
            return pending;
        }
        if (r != -EAGAIN) return r;
        // A connect's own EAGAIN (a Unix listener's full backlog; one under way is engine_busy)
        // is its result: the socket polls writable whatever the backlog, and nothing wakes it
        // when the listener makes room, so the caller tries again (run_connect).
        if (op.code == opcode::connect && !op.engine_busy) return r;
    }
    // A poll for input and output readiness both (POLLIN, POLLPRI or POLLRDHUP with POLLOUT:
    // select's write and except sets) is tried again on every event of the fd: on the readers'
    // list alone, writability (EPOLLOUT only) never reached it.
    if (op.code == opcode::poll && (op.poll_events & POLLOUT) && detail::waits_for_input(op))
        st->pollers.push_back(op);
    else if (detail::waits_for_input(op))
        st->readers.push_back(op);
    else
        st->writers.push_back(op);
    return pending;
}

void epoll_engine::cancel(io_op& op, int err) noexcept {
    if (!op.hook.linked()) return;  // already completed
    // The op is on exactly one of its fd's three lists; unlinking needs no knowledge of which.
    op_list::unlink(op);
    op.cancel_errno = err;
    op.on_complete(&op, -err);
}

int epoll_engine::retry(op_list& list, fd_state& st) noexcept {
    int n = 0;
    // Polls for events the fd does not have (its peer's hang-up, urgent data) wait on, in their
    // places, and say nothing of the ops behind them: a recv behind a poll for POLLRDHUP must
    // still be tried when data comes.
    op_list still;
    while (io_op* op = list.front()) {
        long r = exec_tracked(*op, st);
        if (r == -EAGAIN && op->code == opcode::poll) {
            list.pop_front();
            still.push_back(*op);
            continue;
        }
        if (r == -EAGAIN) break;  // still not ready: later ops on this fd would not be either
        list.pop_front();
        if (r == -ENOBUFS && op->code == opcode::recv_pooled) {  // readable, but no buffer free
            buffer_waiters_.push_back(*op);
            continue;
        }
        op->on_complete(op, r);
        ++n;
    }
    still.splice_back(list);
    list.splice_back(still);
    return n;
}

int epoll_engine::wait(int64_t timeout_ns) noexcept {
    epoll_event* evs = evs_;
    timespec ts{};
    timespec* tsp = nullptr;
    if (!unparked_.empty()) timeout_ns = 0;
    if (timeout_ns >= 0) {
        ts.tv_sec = timeout_ns / 1'000'000'000;
        ts.tv_nsec = timeout_ns % 1'000'000'000;
        tsp = &ts;
    }
    int n = static_cast<int>(sys::epoll_wait(epfd_, evs, k_events, tsp));
    int done = run_unparked();
    if (n < 0) return done;  // EINTR: the caller simply loops
    for (int i = 0; i < n; ++i) {
        uint64_t tag = evs[i].data.u64;
        if (tag == k_notify_tag) {
            uint64_t v;
            (void)sys::read(evfd_, &v, sizeof v, -1);
            continue;
        }
        auto fd = static_cast<size_t>(tag);
        fd_state* st = fd < fds_.size() ? fds_[fd] : nullptr;
        if (!st) continue;
        uint32_t e = evs[i].events;
        if (e & k_in_events) {
            st->drained = false;
            if (e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) st->hup = true;
            done += retry(st->readers, *st);
        }
        if (e & k_out_events) done += retry(st->writers, *st);
        done += retry(st->pollers, *st);
    }
    return done;
}

void epoll_engine::notify() noexcept {
    uint64_t one = 1;
    (void)sys::write(evfd_, &one, sizeof one, -1);
}

// Ops still waiting on a closed fd would never complete: finish them with EBADF. That includes
// recv_pooled ops waiting for a buffer (or run again at the next wait()), which are on no list
// of the fd's: left there, they would receive from whatever file gets the number next.
void epoll_engine::fail_waiters(int fd, fd_state* st) noexcept {
    op_list closed;
    if (st)
        for (op_list* l : {&st->readers, &st->writers, &st->pollers}) closed.splice_back(*l);
    for (op_list* l : {&buffer_waiters_, &unparked_}) {
        l->for_each([&](io_op& op) {
            if (op.fd != fd) return;
            l->erase(op);
            closed.push_back(op);
        });
    }
    while (io_op* op = closed.pop_front()) op->on_complete(op, -EBADF);
}

// Closing: close(2) takes the registration away with the file's last fd, so no EPOLL_CTL_DEL
// (one system call less per connection, as nginx does). If the file lives on through a dup, its
// events keep coming tagged with this fd number and at worst make a later file's waiters try
// again, which they survive (EAGAIN sends them back to wait).
void epoll_engine::forget_fd(int fd, bool closing) noexcept {
    if (fd < 0) return;
    // A recv_pooled that found data but no buffer waits without the fd ever registered.
    fd_state* st = static_cast<size_t>(fd) < fds_.size() ? fds_[fd] : nullptr;
    fail_waiters(fd, st);
    if (!st) return;
    if (st->registered && !closing) (void)sys::epoll_ctl(epfd_, EPOLL_CTL_DEL, fd, nullptr);
    st->registered = false;
}

}  // namespace gluon::engine
