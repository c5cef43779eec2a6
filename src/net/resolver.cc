#include "gluon/common/lazy.h"
#include "gluon/net/resolver.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

#include "gluon/common/spinlock.h"
#include "gluon/runtime/prim_lock.h"
#include "gluon/runtime/runtime.h"
#include "gluon/runtime/waiter.h"

namespace gluon::net {
namespace {

constexpr size_t k_max_host = 1024;

class dns_category_impl final : public std::error_category {
public:
    const char* name() const noexcept override { return "dns"; }
    std::string message(int ev) const override { return ::gai_strerror(ev); }
};

// One getaddrinfo call and everyone waiting for it. Signalled from an offload thread, so its
// lock is never biased.
struct flight {
    prim_lock lk{prim_lock::shared};
    waiter_list waiters;
    bool done = false;
    std::vector<address> addrs;  // port 0
    std::error_code error;
};

struct entry {
    std::vector<address> addrs;  // port 0
    std::error_code error;       // set: a negative entry
    deadline_t expires = 0;
    std::list<std::string>::iterator lru;
};

struct resolver_state {
    spinlock lk;  // held for map operations only, never across a park or a syscall
    resolver_config config;
    std::unordered_map<std::string, entry> cache;
    std::list<std::string> lru;  // cache keys, most recently used first
    std::unordered_map<std::string, std::shared_ptr<flight>> flights;
    lookup_function lookup;
    resolver_stats stats;
};

// Leaked on purpose: a detached lookup may still be running while static destructors run at
// exit, and it must find the state alive.
// (lazy_ptr: not a function-local static, which common/lazy.h says why.)
constinit lazy_ptr<resolver_state> g_state;

resolver_state& state() {
    return g_state.get([] { return new resolver_state; });
}

address with_port(const address& a, uint16_t port) {
    sockaddr_storage ss{};
    std::memcpy(&ss, a.data(), a.size());
    if (ss.ss_family == AF_INET)
        reinterpret_cast<sockaddr_in*>(&ss)->sin_port = htons(port);
    else if (ss.ss_family == AF_INET6)
        reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port = htons(port);
    return address::from(reinterpret_cast<const sockaddr*>(&ss), a.size());
}

std::vector<address> with_port(const std::vector<address>& in, uint16_t port) {
    std::vector<address> out;
    out.reserve(in.size());
    for (const auto& a : in) out.push_back(with_port(a, port));
    return out;
}

// "localhost" and names under ".localhost" (RFC 6761 6.3) are the loopback addresses, whatever
// the system's resolver or /etc/hosts say (curl does the same). With a trailing dot too.
bool is_localhost(std::string_view host) {
    if (!host.empty() && host.back() == '.') host.remove_suffix(1);
    auto iends = [&](std::string_view suffix) {
        if (host.size() < suffix.size()) return false;
        std::string_view tail = host.substr(host.size() - suffix.size());
        for (size_t i = 0; i < tail.size(); ++i)
            if (std::tolower(static_cast<unsigned char>(tail[i])) != suffix[i]) return false;
        return true;
    };
    return host.size() == 9 ? iends("localhost") : iends(".localhost");
}

// IPv4 first: servers on loopback listen on 127.0.0.1 more often than on ::1.
std::vector<address> loopback(uint16_t port, int family) {
    std::vector<address> v;
    if (family != AF_INET6) v.push_back(address::ipv4_loopback(port));
    if (family != AF_INET) v.push_back(address::ipv6_loopback(port));
    return v;
}

// An IP literal, answered without a lookup; std::nullopt if host is not one (a name).
std::optional<result<std::vector<address>>> literal(std::string_view host, uint16_t port,
                                                    int family) {
    auto a = address::from_ip(host, port);
    if (!a) {
        if (a.error() == std::errc::no_such_device_or_address)  // a scope id naming no interface
            return result<std::vector<address>>(unexpected(dns_error(EAI_NONAME)));
        if (host.starts_with("[")) return result<std::vector<address>>(errno_error(EINVAL));
        return std::nullopt;
    }
    if (family != AF_UNSPEC && family != a->family()) return result<std::vector<address>>(unexpected(dns_error(EAI_ADDRFAMILY)));
    return result<std::vector<address>>(std::vector<address>{*a});
}

// The cache key: names are case-insensitive, and each family has its own answer.
std::string cache_key(std::string_view host, int family) {
    std::string k;
    k.reserve(host.size() + 2);
    k.push_back(static_cast<char>('0' + family));
    k.push_back(':');
    for (char c : host) k.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    return k;
}

void evict_to(resolver_state& s, size_t max) {
    while (s.cache.size() > max) {
        s.cache.erase(s.lru.back());
        s.lru.pop_back();
    }
}

// s.lk held.
void cache_put(resolver_state& s, const std::string& key, const std::vector<address>& addrs,
               std::error_code error, duration ttl) {
    if (auto it = s.cache.find(key); it != s.cache.end()) {
        s.lru.erase(it->second.lru);
        s.cache.erase(it);
    }
    if (ttl <= duration::zero() || s.config.max_entries == 0) return;
    s.lru.push_front(key);
    s.cache.emplace(key, entry{addrs, error, deadline_after(ttl), s.lru.begin()});
    evict_to(s, s.config.max_entries);
}

bool negative_cacheable(int eai) {
    return eai == EAI_NONAME || eai == EAI_NODATA || eai == EAI_ADDRFAMILY;
}

// The IP addresses of a getaddrinfo answer, port 0, in its order, without duplicates.
std::vector<address> addresses_of(const addrinfo* res) {
    std::vector<address> addrs;
    for (const addrinfo* ai = res; ai; ai = ai->ai_next) {
        if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6) continue;
        address a = with_port(address::from(ai->ai_addr, ai->ai_addrlen), 0);
        auto same = [&a](const address& b) {
            return b.size() == a.size() && std::memcmp(b.data(), a.data(), a.size()) == 0;
        };
        if (std::none_of(addrs.begin(), addrs.end(), same)) addrs.push_back(a);
    }
    return addrs;
}

// Runs on an offload thread: the lookup, then the cache, then the waiters.
void run_lookup(const std::shared_ptr<flight>& f, const std::string& key, const std::string& host,
                int family, const lookup_function& fn) {
    addrinfo hints{};
    hints.ai_family = family;
    hints.ai_socktype = SOCK_STREAM;  // one entry per address instead of one per socket type
    addrinfo* res = nullptr;
    errno = 0;
    int rc = fn(host.c_str(), &hints, &res);
    const int sys_errno = errno;
    std::vector<address> addrs;
    if (rc == 0) {
        addrs = addresses_of(res);
        if (addrs.empty()) rc = EAI_NODATA;
    }
    if (res) ::freeaddrinfo(res);
    const std::error_code error = rc == 0 ? std::error_code{} : dns_error(rc, sys_errno);

    resolver_state& s = state();
    {
        std::lock_guard g(s.lk);
        if (auto it = s.flights.find(key); it != s.flights.end() && it->second == f)
            s.flights.erase(it);
        if (rc == 0)
            cache_put(s, key, addrs, {}, s.config.positive_ttl);
        else if (negative_cacheable(rc))
            cache_put(s, key, {}, error, s.config.negative_ttl);
    }
    woken_batch woken;
    f->lk.lock();
    f->addrs = std::move(addrs);
    f->error = error;
    f->done = true;
    woken.take_all(f->waiters);
    f->lk.unlock();
    woken.wake_all(0);
}

result<std::vector<address>> answer_of(const std::vector<address>& addrs, std::error_code error,
                                       uint16_t port) {
    if (error) return unexpected(error);
    return with_port(addrs, port);
}

// s.lk held. A fresh cached answer (its entry becomes the most recently used), or nullopt.
std::optional<result<std::vector<address>>> cached(resolver_state& s, const std::string& key,
                                                   uint16_t port) {
    auto it = s.cache.find(key);
    if (it == s.cache.end()) return std::nullopt;
    if (mono_now_ns() >= it->second.expires) {
        s.lru.erase(it->second.lru);
        s.cache.erase(it);
        return std::nullopt;
    }
    ++s.stats.cache_hits;
    s.lru.splice(s.lru.begin(), s.lru, it->second.lru);
    return answer_of(it->second.addrs, it->second.error, port);
}

result<std::vector<address>> wait_for(flight& f, deadline_t deadline, uint16_t port) {
    f.lk.lock();
    if (!f.done) {
        waiter w;
        f.waiters.push_back(w);
        // A timeout or an interrupt unlinks w under f.lk; the lookup then wakes nobody, and its
        // own shared_ptr keeps the flight alive until it ends.
        long r = park(f.lk, w, {.deadline = deadline, .interruptible = true});
        if (r < 0) return errno_error(static_cast<int>(-r));
        f.lk.lock();
    }
    auto out = answer_of(f.addrs, f.error, port);
    f.lk.unlock();
    return out;
}

}  // namespace

// Not a function-local static: common/lazy.h says why.
constinit const immortal<dns_category_impl> g_dns_category;

const std::error_category& dns_category() noexcept { return g_dns_category.value; }

std::error_code dns_error(int eai, int sys_errno) noexcept {
    if (eai == EAI_SYSTEM) return errno_code(sys_errno ? sys_errno : EIO);
    return {eai, dns_category()};
}

result<std::vector<address>> resolve(std::string_view host, uint16_t port,
                                     const resolve_options& opts) {
    if (opts.family != AF_UNSPEC && opts.family != AF_INET && opts.family != AF_INET6)
        return errno_error(EINVAL);
    if (host.empty() || host.size() > k_max_host || host.find('\0') != std::string_view::npos)
        return errno_error(EINVAL);
    if (auto lit = literal(host, port, opts.family)) return std::move(*lit);
    if (is_localhost(host)) return loopback(port, opts.family);

    const deadline_t deadline = deadline_after(opts.timeout);
    std::string key = cache_key(host, opts.family);
    resolver_state& s = state();
    std::shared_ptr<flight> f;
    lookup_function fn;
    {
        std::lock_guard g(s.lk);
        if (opts.use_cache) {
            if (auto hit = cached(s, key, port)) return std::move(*hit);
            if (auto it = s.flights.find(key); it != s.flights.end()) {
                ++s.stats.coalesced;
                f = it->second;
            }
        }
        if (!f) {
            f = std::make_shared<flight>();
            // A use_cache=false lookup is not joined by others: they asked for the cache's
            // semantics, and it asked for a fresh answer.
            if (opts.use_cache) s.flights[key] = f;
            ++s.stats.lookups;
            fn = s.lookup;
            if (!fn) fn = [](const char* h, const addrinfo* hints, addrinfo** out) {
                return ::getaddrinfo(h, nullptr, hints, out);
            };
        }
    }
    if (fn)  // we started it; queued outside s.lk, since queueing takes the pool's mutex
        offload_detached([f, key, h = std::string(host), family = opts.family,
                          fn = std::move(fn)] { run_lookup(f, key, h, family, fn); });
    return wait_for(*f, deadline, port);
}

result<stream> connect(std::string_view host, uint16_t port, duration timeout) {
    const deadline_t deadline = deadline_after(timeout);
    resolve_options o;
    o.timeout = timeout;
    auto addrs = GLUON_TRY(resolve(host, port, o));
    std::error_code last = errno_code(EHOSTUNREACH);
    const size_t n = addrs.size();
    for (size_t i = 0; i < n; ++i) {
        duration share = time_left(deadline);
        if (share.count() == 0) return errno_error(ETIMEDOUT);
        if (share != forever) share /= static_cast<int64_t>(n - i);
        auto s = stream::connect((addrs)[i], share);
        if (s) return s;
        last = s.error();
        if (last == std::errc::operation_canceled) break;
    }
    return unexpected(last);
}

void configure_resolver(const resolver_config& config) {
    resolver_state& s = state();
    std::lock_guard g(s.lk);
    s.config = config;
    evict_to(s, config.max_entries);
}

resolver_config resolver_configuration() {
    resolver_state& s = state();
    std::lock_guard g(s.lk);
    return s.config;
}

void clear_resolver_cache() {
    resolver_state& s = state();
    std::lock_guard g(s.lk);
    s.cache.clear();
    s.lru.clear();
}

resolver_stats resolver_statistics() {
    resolver_state& s = state();
    std::lock_guard g(s.lk);
    resolver_stats out = s.stats;
    out.cached = s.cache.size();
    return out;
}

void set_lookup_function(lookup_function fn) {
    resolver_state& s = state();
    std::lock_guard g(s.lk);
    s.lookup = std::move(fn);
}

}  // namespace gluon::net
