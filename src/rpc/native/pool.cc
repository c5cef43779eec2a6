// The client connection pool: round-robin over healthy connections, a fiber that pings them.
#include "conn.h"
#include "gluon/rpc/native/client.h"

namespace gluon::rpc {

result<std::unique_ptr<pool>> pool::start(connector connect, const pool_options& o) {
    std::unique_ptr<pool> p(new pool);
    p->connect_ = std::move(connect);
    p->o_ = o;
    p->conns_.resize(o.connections ? o.connections : 1);
    GLUON_TRY(p->reopen(0));
    for (size_t i = 1; i < p->conns_.size(); ++i)
        (void)p->reopen(i); // the checks retry
    pool* raw = p.get();
    p->checker_ =
        GLUON_TRY(spawn(fiber_options{.name = "rpc-pool-health"}, [raw] { raw->check_loop(); }));
    return p;
}

pool::~pool() {
    stop();
}

result<void> pool::reopen(size_t i) {
    if (conns_[i].healthy() || stopped_) return {};
    client old = std::move(conns_[i]);
    if (old.healthy() || old.in_flight() == 0) (void)old.close();
    auto s = GLUON_TRY(connect_());
    conns_[i] = GLUON_TRY(client::open(std::move(s), o_.client));
    return {};
}

result<client> pool::get() {
    if (stopped_) return unexpected(make_error_code(errc::connection_closed));
    for (size_t k = 0; k < conns_.size(); ++k) {
        size_t i = next_++ % conns_.size();
        if (conns_[i].healthy()) return conns_[i];
    }
    size_t i = next_++ % conns_.size();
    GLUON_TRY(reopen(i));
    ++replaced_;
    return conns_[i];
}

size_t pool::healthy() const noexcept {
    size_t n = 0;
    for (const client& c : conns_)
        n += c.healthy();
    return n;
}

void pool::check_loop() {
    while (!stopped_) {
        if (!this_fiber::sleep_for(o_.health_interval)) break; // stop() interrupts
        for (size_t i = 0; i < conns_.size() && !stopped_; ++i) {
            client c = conns_[i];
            bool ok = c.healthy() && c.ping(o_.health_timeout).has_value();
            if (stopped_) break;
            if (ok) continue;
            if (this_fiber::interrupt_pending()) break;
            if (c.healthy()) (void)conns_[i].close(); // alive but not answering
            if (reopen(i)) ++replaced_;
        }
    }
}

void pool::stop() noexcept {
    if (stopped_) return;
    stopped_ = true;
    if (checker_.joinable()) {
        (void)checker_.interrupt();
        detail::join_fully(checker_); // it uses the pool: an interrupt of ours must not cut this
    }
    for (client& c : conns_)
        if (c.healthy()) (void)c.close();
}

} // namespace gluon::rpc
