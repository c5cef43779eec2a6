#include "gluon/net/address.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <charconv>
#include <cstdlib>
#include <cstring>

namespace gluon::net {
namespace {

result<uint16_t> parse_port(std::string_view s) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || s.empty() || v > 65535) return errno_error(EINVAL);
    return static_cast<uint16_t>(v);
}

result<address> unix_impl(std::string_view name, bool abstract) {
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    const size_t room = sizeof un.sun_path - 1;  // a leading (abstract) or trailing NUL
    if (name.empty()) return errno_error(EINVAL);
    if (name.size() > room) return errno_error(ENAMETOOLONG);
    std::memcpy(un.sun_path + (abstract ? 1 : 0), name.data(), name.size());
    auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size() + 1);
    return address::from(reinterpret_cast<sockaddr*>(&un), len);
}

}  // namespace

address address::from(const sockaddr* sa, socklen_t len) noexcept {
    address a;
    if (len > sizeof a.storage_) len = sizeof a.storage_;
    std::memcpy(&a.storage_, sa, len);
    a.len_ = len;
    return a;
}

address address::ipv4_loopback(uint16_t port) noexcept {
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_port = htons(port);
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return from(reinterpret_cast<sockaddr*>(&in), sizeof in);
}

address address::ipv6_loopback(uint16_t port) noexcept {
    sockaddr_in6 in6{};
    in6.sin6_family = AF_INET6;
    in6.sin6_port = htons(port);
    in6.sin6_addr = in6addr_loopback;
    return from(reinterpret_cast<sockaddr*>(&in6), sizeof in6);
}

result<address> address::unix_path(std::string_view path) { return unix_impl(path, false); }
result<address> address::unix_abstract(std::string_view name) { return unix_impl(name, true); }

result<address> address::from_ip(std::string_view host, uint16_t port) {
    const bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
    if (bracketed) host = host.substr(1, host.size() - 2);
    char buf[INET6_ADDRSTRLEN + IF_NAMESIZE + 2];
    if (host.empty() || host.size() >= sizeof buf) return errno_error(EINVAL);
    std::memcpy(buf, host.data(), host.size());
    buf[host.size()] = '\0';
    sockaddr_in v4{};
    if (!bracketed && ::inet_pton(AF_INET, buf, &v4.sin_addr) == 1) {
        v4.sin_family = AF_INET;
        v4.sin_port = htons(port);
        return from(reinterpret_cast<sockaddr*>(&v4), sizeof v4);
    }
    sockaddr_in6 v6{};
    char* scope = std::strchr(buf, '%');
    if (scope) *scope++ = '\0';
    if (::inet_pton(AF_INET6, buf, &v6.sin6_addr) != 1) return errno_error(EINVAL);
    if (scope) {
        char* end = nullptr;
        unsigned long id = std::strtoul(scope, &end, 10);
        // A name is an interface; if_nametoindex is an ioctl, it does not block.
        if (*scope == '\0' || *end != '\0') id = ::if_nametoindex(scope);
        if (*scope == '\0') return errno_error(EINVAL);
        if (id == 0 || id > UINT32_MAX) return errno_error(ENXIO);
        v6.sin6_scope_id = static_cast<uint32_t>(id);
    }
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(port);
    return from(reinterpret_cast<sockaddr*>(&v6), sizeof v6);
}

result<address> address::parse(std::string_view text) {
    if (text.starts_with("unix:")) {
        std::string_view rest = text.substr(5);
        if (rest.starts_with("@")) return unix_abstract(rest.substr(1));
        return unix_path(rest);
    }
    if (text.starts_with("[")) {  // [IPv6]:port
        size_t close = text.find("]:");
        if (close == std::string_view::npos) return errno_error(EINVAL);
        auto p = GLUON_TRY(parse_port(text.substr(close + 2)));
        return from_ip(text.substr(0, close + 1), p);
    }
    size_t colon = text.rfind(':');  // IPv4:port (an IPv6 address needs its brackets here)
    if (colon == std::string_view::npos) return errno_error(EINVAL);
    std::string_view host = text.substr(0, colon);
    if (host.find(':') != std::string_view::npos) return errno_error(EINVAL);
    auto p = GLUON_TRY(parse_port(text.substr(colon + 1)));
    return from_ip(host, p);
}

uint16_t address::port() const noexcept {
    if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage_)->sin_port);
    if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage_)->sin6_port);
    return 0;
}

std::string address::to_string() const {
    char buf[INET6_ADDRSTRLEN] = {};
    switch (family()) {
        case AF_INET: {
            auto* in = reinterpret_cast<const sockaddr_in*>(&storage_);
            inet_ntop(AF_INET, &in->sin_addr, buf, sizeof buf);
            return std::string(buf) + ":" + std::to_string(port());
        }
        case AF_INET6: {
            auto* in6 = reinterpret_cast<const sockaddr_in6*>(&storage_);
            inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof buf);
            std::string host(buf);
            // The scope id by number (RFC 4007 11.2), which from_ip reads back: dropped, a
            // link-local address printed and parsed again named no interface, and two that
            // differ only in theirs printed the same (socket_pool keys connections by it).
            // An interface name would cost a system call per address printed.
            if (in6->sin6_scope_id != 0) host += "%" + std::to_string(in6->sin6_scope_id);
            return "[" + host + "]:" + std::to_string(port());
        }
        case AF_UNIX: {
            auto* un = reinterpret_cast<const sockaddr_un*>(&storage_);
            size_t n = len_ > offsetof(sockaddr_un, sun_path) ? len_ - offsetof(sockaddr_un, sun_path) : 0;
            if (n == 0) return "unix:";
            if (un->sun_path[0] == '\0') return "unix:@" + std::string(un->sun_path + 1, n - 1);
            return "unix:" + std::string(un->sun_path, strnlen(un->sun_path, n));
        }
        default: return "(unspecified)";
    }
}

}  // namespace gluon::net
