// Name resolution that parks only the calling fiber. IP literals are parsed in place; names go
// to getaddrinfo(3) (/etc/hosts, DNS, ... as nsswitch.conf says) on the offload pool, because
// glibc has no asynchronous interface that honours nsswitch. Answers are kept in a process-wide
// cache, and concurrent lookups of one name share a single getaddrinfo call.
//
// A caller that times out or is interrupted returns at once; its lookup finishes in the
// background and still fills the cache.
#pragma once

#include <netdb.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string_view>
#include <system_error>
#include <vector>

#include "gluon/common/clock.h"
#include "gluon/common/result.h"
#include "gluon/net/address.h"
#include "gluon/net/socket.h"

namespace gluon::net {

/// The category of getaddrinfo's EAI_* codes (negative on glibc); message() is gai_strerror's.
/// EAI_SYSTEM never appears: it is reported as the errno it carries, in the generic category.
const std::error_category& dns_category() noexcept;
/// The error_code for an EAI_* value (EAI_SYSTEM: errno_code(sys_errno)).
std::error_code dns_error(int eai, int sys_errno = 0) noexcept;

struct resolve_options {
    /// AF_UNSPEC (both, in getaddrinfo's preference order), AF_INET or AF_INET6.
    int family = AF_UNSPEC;
    /// For the whole call, including waiting for a lookup another caller started.
    duration timeout = forever;
    /// false: neither read the cache nor join a lookup in flight; the answer still refreshes
    /// the cache.
    bool use_cache = true;
};

/// Resolves host to its addresses with `port` set, in the resolver's order, without duplicates.
/// host may be an IPv4 literal, an IPv6 literal (optionally in brackets, with a %scope) or a
/// name. Literals never leave the calling thread.
/// Errors: EINVAL (empty host, embedded NUL, longer than 1024 bytes, or family not one of the
/// three), ETIMEDOUT, ECANCELED (interrupted), dns_category() codes (EAI_NONAME: no such name;
/// EAI_AGAIN: temporary failure, try again; EAI_ADDRFAMILY: a literal of the other family ...),
/// and errno values of EAI_SYSTEM failures.
result<std::vector<address>> resolve(std::string_view host, uint16_t port,
                                     const resolve_options& opts = {});

/// Resolves host and connects to its addresses in turn until one accepts, all within `timeout`.
/// With several addresses each attempt gets an equal share of the time left, so one address
/// that drops SYNs cannot use up the whole budget. Errors: those of resolve(), then the last
/// address's connect error (ECONNREFUSED, ETIMEDOUT, ENETUNREACH, ...); ECANCELED stops at once.
result<stream> connect(std::string_view host, uint16_t port, duration timeout = forever);

struct resolver_config {
    /// How long a successful answer is served from the cache.
    duration positive_ttl = std::chrono::seconds(30);
    /// How long "no such name" (EAI_NONAME, EAI_NODATA) is served from the cache. Temporary
    /// failures (EAI_AGAIN, EAI_FAIL, system errors) are never cached.
    duration negative_ttl = std::chrono::seconds(5);
    /// Bound on cached names; the least recently used entry goes first.
    size_t max_entries = 1024;
};

/// Replaces the cache configuration (shrinking max_entries evicts at once). Any thread.
void configure_resolver(const resolver_config& config);
resolver_config resolver_configuration();

/// Drops every cached answer (lookups in flight still complete and are cached). Any thread.
void clear_resolver_cache();

struct resolver_stats {
    uint64_t lookups = 0;     // getaddrinfo calls started
    uint64_t cache_hits = 0;  // answered from the cache, positive or negative
    uint64_t coalesced = 0;   // joined a lookup already in flight
    size_t cached = 0;        // names in the cache now
};
/// Counters since the process started (not reset by clear_resolver_cache).
resolver_stats resolver_statistics();

/// getaddrinfo(3)'s shape; freeaddrinfo(3) frees what it returns.
using lookup_function = std::function<int(const char* host, const addrinfo* hints, addrinfo** out)>;
/// For tests: makes the resolver call fn instead of getaddrinfo (an empty fn restores it). fn
/// runs on an offload thread, so it may block on std primitives, never on fiber ones.
void set_lookup_function(lookup_function fn);

}  // namespace gluon::net
