#include "gluon/net/socket_pool.h"

#include <poll.h>
#include <sys/socket.h>

#include <cctype>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gluon/common/spinlock.h"
#include "gluon/net/resolver.h"
#include "gluon/runtime/fd.h"
#include "gluon/runtime/vcpu.h"

namespace gluon::net {
namespace detail {

struct idle_conn {
    stream s;
    deadline_t expires;
};

// Closes a stream of vCPU `owner` (the one it was got on) from the calling thread. Off that
// vCPU it is shut down first: on io_uring the receive that vCPU keeps armed on a stream that
// reads ahead holds the socket open, the peer seeing no end, until data comes, which an idle
// connection never gets.
void close_conn(stream& s, int owner) noexcept {
    if (s.valid() && owner != current_vcpu_index()) (void)s.shutdown(SHUT_RDWR);
    (void)s.close();
}

// Streams taken out of the pool under its lock, closed once the lock is dropped (closing is a
// syscall, and the lock is a spinlock): declare it before the lock guard.
class closer {
public:
    closer() = default;
    closer(const closer&) = delete;
    closer& operator=(const closer&) = delete;
    ~closer() {
        for (auto& [s, owner] : conns_) close_conn(s, owner);
    }
    void add(stream s, int owner) { conns_.emplace_back(std::move(s), owner); }

private:
    std::vector<std::pair<stream, int>> conns_;
};

// Shared by the pool and its leases, so a lease that outlives the pool can still be released
// (it is then closed).
struct pool_core {
    explicit pool_core(const pool_options& o) : opts(o) {}

    const pool_options opts;
    mutable spinlock lk;
    bool closed = false;  // the pool is gone
    // vCPU index -> key -> idle connections, oldest first (reused from the back: the most
    // recently used connection is the least likely to have been closed by the server).
    std::unordered_map<int, std::unordered_map<std::string, std::deque<idle_conn>>> idle;
    pool_stats stats;
    // Every vCPU's keys are swept for expired connections at most once per idle_timeout, by
    // whichever vCPU uses the pool then, so keys that are never asked for again, and vCPUs that
    // have ended (their index never comes back), do not hold their connections forever.
    deadline_t next_sweep = 0;

    deadline_t expiry(deadline_t now) const noexcept {
        const int64_t t = opts.idle_timeout.count();
        return t >= k_no_deadline - now ? k_no_deadline : now + t;
    }

    // lk held. Moves expired connections of q (vCPU v's) to out.
    void drop_expired(int v, std::deque<idle_conn>& q, deadline_t now, closer& out) {
        while (!q.empty() && q.front().expires <= now) {
            out.add(std::move(q.front().s), v);
            q.pop_front();
            ++stats.discarded;
            --stats.idle;
        }
    }

    // lk held. Sweeps every vCPU's keys if it is time to.
    void maybe_sweep(deadline_t now, closer& out) {
        if (now < next_sweep) return;
        next_sweep = expiry(now);
        for (auto vit = idle.begin(); vit != idle.end();) {
            auto& keys = vit->second;
            for (auto it = keys.begin(); it != keys.end();) {
                drop_expired(vit->first, it->second, now, out);
                it = it->second.empty() ? keys.erase(it) : std::next(it);
            }
            vit = keys.empty() ? idle.erase(vit) : std::next(vit);
        }
    }
};

}  // namespace detail

namespace {

// A connection that the peer closed or reset, or that has bytes nobody asked for (a late or
// unsolicited response: the protocol state is unknown), must not be reused. A zero-timeout
// fd::poll tells without consuming anything; it asks the engine first, as a stream that reads
// ahead (io_uring) may have had those bytes, or the end, taken off a socket that is empty now.
bool healthy(const stream& s) noexcept {
    auto ev = fd::poll(s.get(), POLLIN | POLLRDHUP, duration::zero());
    return !ev && ev.error() == std::errc::timed_out;
}

std::string host_key(std::string_view host, uint16_t port) {
    std::string k;
    k.reserve(host.size() + 6);
    for (char c : host) k.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    k.push_back('|');
    k += std::to_string(port);
    return k;
}

}  // namespace

// ---- lease ------------------------------------------------------------------------------------

socket_pool::lease& socket_pool::lease::operator=(lease&& o) noexcept {
    if (this != &o) {
        (void)close();
        core_ = std::move(o.core_);
        key_ = std::move(o.key_);
        s_ = std::move(o.s_);
        vcpu_ = o.vcpu_;
        reused_ = o.reused_;
    }
    return *this;
}

socket_pool::lease::~lease() {
    if (s_.valid()) detail::close_conn(s_, vcpu_);
}

result<void> socket_pool::lease::close() noexcept {
    core_.reset();
    if (s_.valid() && vcpu_ != current_vcpu_index()) (void)s_.shutdown(SHUT_RDWR);  // see close_conn
    return s_.close();
}

void socket_pool::lease::release() noexcept {
    auto core = std::move(core_);
    if (!core || !s_.valid() || current_vcpu_index() < 0) {  // off a vCPU no get() could take it again
        detail::close_conn(s_, vcpu_);
        return;
    }
    // Pooled for the vCPU it was got on, wherever it is released: a stream that reads ahead
    // must be read on that vCPU only (its engine may hold the stream's next bytes).
    const int v = vcpu_;
    const deadline_t now = mono_now_ns();
    detail::closer to_close;  // closes after the lock is dropped
    std::lock_guard g(core->lk);
    if (core->closed || core->opts.max_idle_per_key == 0) {
        to_close.add(std::move(s_), v);
        return;
    }
    auto& q = core->idle[v][key_];
    core->drop_expired(v, q, now, to_close);
    q.push_back({std::move(s_), core->expiry(now)});
    ++core->stats.idle;
    while (q.size() > core->opts.max_idle_per_key) {
        to_close.add(std::move(q.front().s), v);
        q.pop_front();
        ++core->stats.discarded;
        --core->stats.idle;
    }
    core->maybe_sweep(now, to_close);
}

// ---- socket_pool ------------------------------------------------------------------------------

socket_pool::socket_pool(const pool_options& opts)
    : core_(std::make_shared<detail::pool_core>(opts)) {}

socket_pool::~socket_pool() {
    {
        std::lock_guard g(core_->lk);
        core_->closed = true;  // leases still out close their connections on release
    }
    clear();
}

result<socket_pool::lease> socket_pool::get(std::string_view host, uint16_t port) {
    const duration t = core_->opts.connect_timeout;
    return get_keyed(host_key(host, port), [&] { return net::connect(host, port, t); });
}

result<socket_pool::lease> socket_pool::get(const address& addr) {
    const duration t = core_->opts.connect_timeout;
    return get_keyed(addr.to_string(), [&] { return stream::connect(addr, t); });
}

result<socket_pool::lease> socket_pool::get_keyed(std::string key,
                                                  const std::function<result<stream>()>& connect) {
    const int v = current_vcpu_index();
    if (v < 0) return errno_error(EPERM);
    bool discarded = false;  // the previous candidate was unhealthy (counted under the next lock)
    for (;;) {
        stream candidate;
        {
            detail::closer to_close;  // closes after the lock is dropped
            std::lock_guard g(core_->lk);
            if (discarded) ++core_->stats.discarded;
            const deadline_t now = mono_now_ns();
            core_->maybe_sweep(now, to_close);
            if (auto vit = core_->idle.find(v); vit != core_->idle.end()) {
                auto& keys = vit->second;
                if (auto it = keys.find(key); it != keys.end()) {
                    core_->drop_expired(v, it->second, now, to_close);
                    if (!it->second.empty()) {
                        candidate = std::move(it->second.back().s);
                        it->second.pop_back();
                        --core_->stats.idle;
                    }
                    if (it->second.empty()) keys.erase(it);
                }
                if (keys.empty()) core_->idle.erase(vit);
            }
            if (!candidate.valid()) ++core_->stats.misses;
        }
        if (!candidate.valid()) break;
        if (healthy(candidate)) {  // a syscall: outside the lock
            std::lock_guard g(core_->lk);
            ++core_->stats.hits;
            return lease(core_, std::move(key), std::move(candidate), v, true);
        }
        discarded = true;
    }
    auto s = GLUON_TRY(connect());
    return lease(core_, std::move(key), std::move(s), v, false);
}

void socket_pool::clear() noexcept {
    detail::closer to_close;  // closes after the lock is dropped
    std::lock_guard g(core_->lk);
    for (auto& [v, keys] : core_->idle)
        for (auto& [key, q] : keys)
            for (auto& c : q) to_close.add(std::move(c.s), v);
    core_->idle.clear();
    core_->stats.idle = 0;
}

pool_stats socket_pool::stats() const noexcept {
    std::lock_guard g(core_->lk);
    return core_->stats;
}

}  // namespace gluon::net
