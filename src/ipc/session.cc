// ipc::session: the handle, the reader fiber's lifetime, failure and clean-up.
#include "gluon/common/log.h"
#include "session_impl.h"

namespace gluon::ipc {
namespace detail {

session_impl::~session_impl() = default;

std::shared_ptr<stream_impl> make_stream(const std::shared_ptr<session_impl>& s, uint32_t id) {
    auto st = std::make_shared<stream_impl>();
    st->s = s;
    st->id = id;
    return st;
}

void session_impl::start_reader() {
    auto self = shared_from_this();
    auto f = spawn(fiber_options{.name = "ipc reader"}, [self] { self->read_loop(); });
    if (!f) {
        fail(f.error());
        reader_done.store(true);
        return;
    }
    std::lock_guard lk(mu);  // fail() on another vCPU interrupts it
    reader = std::move(*f);
}

void session_impl::fail(std::error_code e) noexcept {
    std::vector<std::shared_ptr<stream_impl>> wake;
    std::lock_guard lk(mu);
    if (err) return;
    err = e;
    for (auto& [id, st] : streams) wake.push_back(st);
    for (auto& st : wake) st->cv.notify_all();
    accept_cv.notify_all();
    space_cv.notify_all();
    // The socket is not shut down here: the peer takes a hang-up as the end of our pops from
    // its send queue, which it then empties itself, while our reader may be popping it right
    // now. The reader hangs up once it has stopped (finish_queues).
    if (reader.joinable() && !reader_ending) (void)reader.interrupt();
}

void session_impl::shutdown_and_join() noexcept {
    {
        std::lock_guard lk(mu);
        if (closing) return;  // closed already, or being closed by another fiber
        closing = true;
    }
    fail(make_error_code(errc::session_closed));  // the reader stops, unless it has already
    fiber r;
    {
        std::lock_guard lk(mu);
        r = std::move(reader);
    }
    if (r.joinable()) (void)r.join();
    else finish_queues(false);  // no reader ever ran: its last steps are ours
    release_all();
    // A writer on another vCPU may still be in a send on the socket (the shutdown makes it
    // fail), and finish_queues shuts it down under mu: the fd is taken from under both
    // (write_mu, mu), or its number, reused by another file once closed, would have them write
    // to or shut down that.
    int fd;
    {
        std::lock_guard w(write_mu);
        std::lock_guard lk(mu);
        fd = sock.release();
    }
    (void)net::socket_fd(fd).close();
}

// Gives back the slices of the messages this side took and did not read (the queues are
// finish_queues').
void session_impl::release_all() noexcept {
    std::vector<std::shared_ptr<stream_impl>> all;
    {
        std::lock_guard lk(mu);
        for (auto& [id, st] : streams) all.push_back(st);
        for (auto& st : accepted) all.push_back(st);
        streams.clear();
        accepted.clear();
    }
    if (!region) return;
    buffer_region& r = region->region;
    for (auto& st : all) {
        std::deque<rx_message> rx;
        {
            std::lock_guard lk(mu);
            rx.swap(st->rx);
            st->readable = 0;
        }
        for (auto& m : rx)
            for (size_t i = m.index; i < m.pieces.size(); ++i) (void)r.push(m.pieces[i].abs);
    }
}

// A queue has one consumer at a time, and a hang-up on the socket hands it over: each side pops
// its receive queue only until it hangs up, and its send queue only once the peer has hung up
// (a gluon peer hangs up after its last pop, so does this; a peer that crashed pops nothing
// more). Two sides popping one queue at once would give one element's slices back twice (a
// corrupt free list) and skip another's. Runs once the session has failed, so nothing is put
// on the send queue any more.
void session_impl::finish_queues(bool peer_hung_up) noexcept {
    give_back(recv_q);
    {
        std::lock_guard lk(mu);  // as shutdown_and_join takes the fd
        (void)sock.shutdown(SHUT_WR);  // what the peer puts from now on, it takes back itself
    }
    bool left;
    {
        // Under send_mu: a writer that found the session up has put its element by now.
        std::lock_guard lk(send_mu);
        left = queue_map.data() && send_q.size() != 0;
    }
    // Both sides may be closing at once: what we put after the peer's last pop is ours to give
    // back once it hangs up, which a peer does promptly on our hang-up. One that does not is
    // not waited for beyond close_timeout (its elements then stay).
    if (left && !peer_hung_up) peer_hung_up = wait_hang_up(deadline_after(opts.close_timeout));
    if (peer_hung_up) {
        std::lock_guard lk(send_mu);
        give_back(send_q);
    }
    std::lock_guard lk(mu);
    peer_gone = peer_hung_up;
    // Wakes a writer still waiting for room on the socket (a shutdown of only the sending half
    // reports no event to epoll), and a peer waiting on us.
    (void)sock.shutdown(SHUT_RDWR);
}

void session_impl::give_back(queue_view& q) noexcept {
    if (!queue_map.data() || !region) return;
    buffer_region& r = region->region;
    queue_element e;
    std::vector<buffer_region::piece> pieces;
    while (q.pop(e) == queue_view::outcome::ok) {
        if ((e.status & 0xff) != 0 || !r.read_chain(e.offset, pieces)) continue;
        for (const auto& p : pieces) (void)r.push(p.abs);
    }
}

bool session_impl::wait_hang_up(deadline_t dl) noexcept {
    uint8_t buf[4096];
    bool interrupted = false;
    for (;;) {
        auto r = sock.read_some(buf, sizeof buf, time_left(dl));
        if (r) {
            if (*r == 0) return true;
            continue;
        }
        if (r.error() == std::errc::connection_reset || r.error() == std::errc::broken_pipe) return true;
        // One interrupt may still have been pending from before the reader ended (fail() sends
        // none since): it ends one read, not the wait.
        if (r.error() != std::errc::operation_canceled || std::exchange(interrupted, true)) return false;
    }
}

}  // namespace detail

session::session(std::shared_ptr<detail::session_impl> s) noexcept : impl_(std::move(s)) {}
session::session(session&&) noexcept = default;
session& session::operator=(session&& o) noexcept {
    if (this != &o) {
        (void)close();
        impl_ = std::move(o.impl_);
    }
    return *this;
}
session::~session() { (void)close(); }

result<session> session::connect(const net::address& addr, const session_options& opts) {
    auto si = GLUON_TRY(detail::client_handshake(addr, opts, nullptr));
    si->start_reader();
    return session(std::move(si));
}

result<session> session::accept(net::stream sock, const session_options& opts) {
    auto si = GLUON_TRY(detail::server_handshake(std::move(sock), opts, nullptr));
    si->start_reader();
    return session(std::move(si));
}

result<stream> session::open_stream() {
    if (!impl_) return errno_error(EBADF);
    if (!impl_->client) return errno_error(EPERM);
    std::lock_guard lk(impl_->mu);
    if (impl_->err) return unexpected(impl_->err);
    uint32_t id = impl_->next_id.fetch_add(1, std::memory_order_relaxed) + 1;  // shmipc: ids from 2
    auto st = detail::make_stream(impl_, id);
    impl_->streams.emplace(id, st);
    return stream(std::move(st));
}

result<stream> session::accept_stream(duration timeout) {
    if (!impl_) return errno_error(EBADF);
    if (impl_->client) return errno_error(EPERM);
    deadline_t dl = deadline_after(timeout);
    std::unique_lock lk(impl_->mu);
    for (;;) {
        if (!impl_->accepted.empty()) {
            auto st = std::move(impl_->accepted.front());
            impl_->accepted.pop_front();
            return stream(std::move(st));
        }
        if (impl_->err) return unexpected(impl_->err);
        long r = impl_->accept_cv.wait_interruptible(lk, dl);
        if (r < 0) return errno_error(int(-r));
    }
}

result<void> session::close() {
    // The state stays: other fibers still in a call on this session get session_closed.
    if (impl_) impl_->shutdown_and_join();
    return {};
}

bool session::healthy() const noexcept { return !error(); }

std::error_code session::error() const noexcept {
    if (!impl_) return make_error_code(errc::session_closed);
    std::lock_guard lk(impl_->mu);
    return impl_->err;
}

bool session::is_client() const noexcept { return impl_ && impl_->client; }
int session::version() const noexcept { return impl_ ? impl_->version : 0; }

session_counters session::counters() const noexcept {
    session_counters c;
    if (!impl_) return c;
    const auto& s = impl_->stats;
    c.bytes_sent = s.bytes_sent.load();
    c.bytes_received = s.bytes_received.load();
    c.messages_sent = s.messages_sent.load();
    c.messages_received = s.messages_received.load();
    c.fallbacks_sent = s.fallbacks_sent.load();
    c.fallbacks_received = s.fallbacks_received.load();
    c.polls_sent = s.polls_sent.load();
    c.polls_received = s.polls_received.load();
    c.full_waits = s.full_waits.load();
    return c;
}

std::vector<list_occupancy> session::occupancy() const {
    std::vector<list_occupancy> out;
    if (!impl_ || !impl_->region) return out;
    const buffer_region& r = impl_->region->region;
    for (size_t i = 0; i < r.lists(); ++i) out.push_back({r.list(i).data_cap, r.list(i).cap, r.free_count(i)});
    return out;
}

std::pair<int64_t, int64_t> session::queued() const noexcept {
    if (!impl_ || !impl_->queue_map.data()) return {0, 0};
    return {impl_->send_q.size(), impl_->recv_q.size()};
}

result<void> session::send_hot_restart(uint64_t epoch) {
    if (!impl_) return errno_error(EBADF);
    if (impl_->client) return errno_error(EPERM);
    {
        std::lock_guard lk(impl_->mu);
        impl_->hot_restarts.emplace(epoch, false);  // before sending: the ack may come at once
    }
    uint8_t m[16];
    wire::encode_header(m, 16, impl_->version, wire::type::hot_restart);
    wire::put_u64(m + 8, epoch);
    return impl_->write_control(m, sizeof m);
}

bool session::hot_restart_acked(uint64_t epoch) const noexcept {
    if (!impl_) return false;
    std::lock_guard lk(impl_->mu);
    auto it = impl_->hot_restarts.find(epoch);
    return it != impl_->hot_restarts.end() && it->second;
}

std::optional<uint64_t> session::hot_restart_requested() const noexcept {
    if (!impl_) return std::nullopt;
    std::lock_guard lk(impl_->mu);
    return impl_->hot_restart_epoch;
}

result<void> session::ack_hot_restart(uint64_t epoch) {
    if (!impl_) return errno_error(EBADF);
    if (!impl_->client) return errno_error(EPERM);
    uint8_t m[16];
    wire::encode_header(m, 16, impl_->version, wire::type::hot_restart_ack);
    wire::put_u64(m + 8, epoch);
    return impl_->write_control(m, sizeof m);
}

}  // namespace gluon::ipc
