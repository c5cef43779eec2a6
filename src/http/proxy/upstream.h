// Connections to upstream servers, kept alive in a pool per upstream and vCPU.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gluon/common/spinlock.h"
#include "gluon/http/parser.h"
#include "gluon/http/proxy.h"
#include "gluon/net/address.h"
#include "gluon/net/socket.h"

namespace gluon::http::detail {

/// Where an upstream is: an IP literal is parsed once, a name is resolved at each connect.
struct upstream_address {
    std::string host;   // without brackets
    uint16_t port = 0;
    std::string authority;  // "host:port", as a Host field
    std::optional<net::address> ip;
    /// "host:port" or "[v6]:port". Errors: EINVAL.
    static result<upstream_address> parse(std::string_view hostport);
};

struct upstream_conn {
    net::stream sock;
    /// The buffer both ways, kept with the connection. A response body read whole into it is
    /// sent from it without a copy (response::body with the buffer as owner): a connection
    /// taken while that send is still under way gets a new buffer (take()).
    std::shared_ptr<char[]> buf;
    size_t cap = 0;
    std::string head;             // the request head being sent
    std::vector<header> fields;   // the response head's fields
    int64_t idle_since = 0;
    bool reused = false;
};

class upstream_pool {
public:
    explicit upstream_pool(const proxy_common_options& o) noexcept : o_(o) {}
    ~upstream_pool();
    upstream_pool(const upstream_pool&) = delete;
    upstream_pool& operator=(const upstream_pool&) = delete;

    /// A pooled connection to `key` from this vCPU, or a new one to `a`. With `check` (for a
    /// request that cannot be sent again), a pooled one is taken only if the upstream has not
    /// closed it, however briefly it idled. Errors: those of net::connect (ETIMEDOUT past
    /// connect_timeout, ECONNREFUSED, ...), ENOMEM.
    result<upstream_conn> take(const std::string& key, const upstream_address& a, bool check);
    /// Keeps a connection whose last exchange ended cleanly for the next one.
    void give_back(const std::string& key, upstream_conn c);

private:
    using slot = std::pair<std::thread::id, std::string>;
    const proxy_common_options& o_;
    spinlock lock_;
    std::map<slot, std::vector<upstream_conn>, std::less<>> idle_;
};

}  // namespace gluon::http::detail
