// Socket addresses: IPv4, IPv6 and Unix (path and abstract), parsed from and printed as text.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "gluon/common/result.h"

namespace gluon::net {

class address {
public:
    address() noexcept = default;
    /// Parses "1.2.3.4:80", "[::1]:80", "unix:/run/x.sock" or "unix:@abstract-name".
    /// Errors: EINVAL (malformed), ENAMETOOLONG (Unix path too long). No name resolution.
    static result<address> parse(std::string_view text);
    /// An IP literal and a port: "192.0.2.1", "2001:db8::1", "[2001:db8::1]", and IPv6 with a
    /// scope id by interface name or number ("fe80::1%eth0", "fe80::1%2"). The one IP-literal
    /// parser: parse() and name resolution use it. Errors: EINVAL (not an IP literal), ENXIO (a
    /// scope id that names no interface). No name resolution.
    static result<address> from_ip(std::string_view host, uint16_t port);
    static address ipv4_loopback(uint16_t port) noexcept;
    static address ipv6_loopback(uint16_t port) noexcept;
    static result<address> unix_path(std::string_view path);
    /// Linux abstract namespace (no file; the name is not NUL-terminated).
    static result<address> unix_abstract(std::string_view name);
    /// From a kernel-filled sockaddr (accept, getsockname).
    static address from(const sockaddr* sa, socklen_t len) noexcept;

    int family() const noexcept { return storage_.ss_family; }
    bool empty() const noexcept { return len_ == 0; }
    /// The port of an IP address (0 otherwise).
    uint16_t port() const noexcept;
    const sockaddr* data() const noexcept { return reinterpret_cast<const sockaddr*>(&storage_); }
    socklen_t size() const noexcept { return len_; }
    /// "192.0.2.1:80", "[2001:db8::1]:80", "unix:/run/x.sock", "unix:@name"; an IPv6 scope id
    /// by number ("[fe80::1%2]:22"). parse() reads each form back to the same address.
    std::string to_string() const;

private:
    sockaddr_storage storage_{};
    socklen_t len_ = 0;
};

}  // namespace gluon::net
