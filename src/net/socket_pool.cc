#include "gluon/net/socket_pool.h"

#include <poll.h>

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

// Shared by the pool and its leases, so a lease that outlives the pool can still be released
// (it is then closed). Streams leave the maps under the lock and are closed after it is dropped:
// closing is a syscall, and the lock is a spinlock.
struct pool_core {
    explicit pool_core(const pool_options& o) : opts(o) {}

    const pool_options opts;
    mutable spinlock lk;
    bool closed = false;  // the pool is gone
    // vCPU index -> key -> idle connections, oldest first (reused from the back: the most
    // recently used connection is the least likely to have been closed by the server).
    std::unordered_map<int, std::unordered_map<std::string, std::deque<idle_conn>>> idle;
    pool_stats stats;
    // Each vCPU sweeps all its keys for expired connections at most once per idle_timeout, so
    // keys that are never asked for again do not hold their connections forever.
    std::unordered_map<int, deadline_t> next_sweep;

    deadline_t expiry(deadline_t now) const noexcept {
        const int64_t t = opts.idle_timeout.count();
        return t >= k_no_deadline - now ? k_no_deadline : now + t;
    }

    // lk held. Moves expired connections of q to out.
    void drop_expired(std::deque<idle_conn>& q, deadline_t now, std::vector<stream>& out) {
        while (!q.empty() && q.front().expires <= now) {
            out.push_back(std::move(q.front().s));
            q.pop_front();
            ++stats.discarded;
            --stats.idle;
        }
    }

    // lk held. Sweeps vCPU v's keys if it is time to.
    void maybe_sweep(int v, deadline_t now, std::vector<stream>& out) {
        deadline_t& next = next_sweep[v];
        if (now < next) return;
        next = expiry(now);
        auto vit = idle.find(v);
        if (vit == idle.end()) return;
        auto& keys = vit->second;
        for (auto it = keys.begin(); it != keys.end();) {
            drop_expired(it->second, now, out);
            it = it->second.empty() ? keys.erase(it) : std::next(it);
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
        reused_ = o.reused_;
    }
    return *this;
}

result<void> socket_pool::lease::close() noexcept {
    core_.reset();
    return s_.close();
}

void socket_pool::lease::release() noexcept {
    auto core = std::move(core_);
    const int v = current_vcpu_index();
    if (!core || !s_.valid() || v < 0) {  // off a vCPU no get() could take it again
        (void)s_.close();
        return;
    }
    const deadline_t now = mono_now_ns();
    std::vector<stream> to_close;
    {
        std::lock_guard g(core->lk);
        if (core->closed || core->opts.max_idle_per_key == 0) {
            to_close.push_back(std::move(s_));
        } else {
            auto& q = core->idle[v][key_];
            core->drop_expired(q, now, to_close);
            q.push_back({std::move(s_), core->expiry(now)});
            ++core->stats.idle;
            while (q.size() > core->opts.max_idle_per_key) {
                to_close.push_back(std::move(q.front().s));
                q.pop_front();
                ++core->stats.discarded;
                --core->stats.idle;
            }
            core->maybe_sweep(v, now, to_close);
        }
    }
    // to_close goes out of scope here, outside the lock: the streams close.
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
        std::vector<stream> to_close;
        {
            std::lock_guard g(core_->lk);
            if (discarded) ++core_->stats.discarded;
            const deadline_t now = mono_now_ns();
            core_->maybe_sweep(v, now, to_close);
            auto& keys = core_->idle[v];
            if (auto it = keys.find(key); it != keys.end()) {
                core_->drop_expired(it->second, now, to_close);
                if (!it->second.empty()) {
                    candidate = std::move(it->second.back().s);
                    it->second.pop_back();
                    --core_->stats.idle;
                }
                if (it->second.empty()) keys.erase(it);
            }
            if (!candidate.valid()) ++core_->stats.misses;
        }
        to_close.clear();  // closes, outside the lock
        if (!candidate.valid()) break;
        if (healthy(candidate)) {  // a syscall: outside the lock
            std::lock_guard g(core_->lk);
            ++core_->stats.hits;
            return lease(core_, std::move(key), std::move(candidate), true);
        }
        discarded = true;
    }
    auto s = GLUON_TRY(connect());
    return lease(core_, std::move(key), std::move(s), false);
}

void socket_pool::clear() noexcept {
    decltype(core_->idle) taken;  // destroyed (closed) after the lock is dropped
    std::lock_guard g(core_->lk);
    taken.swap(core_->idle);
    core_->stats.idle = 0;
}

pool_stats socket_pool::stats() const noexcept {
    std::lock_guard g(core_->lk);
    return core_->stats;
}

}  // namespace gluon::net
