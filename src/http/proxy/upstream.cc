#include "upstream.h"

#include <sys/socket.h>

#include <charconv>
#include <mutex>

#include "gluon/common/clock.h"
#include "gluon/net/resolver.h"
#include "gluon/sys/ops.h"

namespace gluon::http::detail {

result<upstream_address> upstream_address::parse(std::string_view hp) {
    upstream_address a;
    size_t colon = hp.rfind(':');
    if (colon == std::string_view::npos || colon + 1 == hp.size()) return errno_error(EINVAL);
    std::string_view host = hp.substr(0, colon), port = hp.substr(colon + 1);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    unsigned p = 0;
    auto r = std::from_chars(port.data(), port.data() + port.size(), p);
    if (r.ec != std::errc() || r.ptr != port.data() + port.size() || p == 0 || p > 65535 || host.empty())
        return errno_error(EINVAL);
    a.host.assign(host);
    a.port = static_cast<uint16_t>(p);
    a.authority.assign(hp);
    if (auto ip = net::address::from_ip(a.host, a.port)) a.ip = *ip;
    return a;
}

upstream_pool::~upstream_pool() {
    for (auto& [k, v] : idle_)
        for (auto& c : v) (void)c.sock.close();
}

result<upstream_conn> upstream_pool::take(const std::string& key, const upstream_address& a, bool check) {
    const int64_t now = mono_coarse_ns();
    const int64_t idle_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(o_.idle_timeout).count();
    for (;;) {
        upstream_conn c;
        {
            std::lock_guard g(lock_);
            auto it = idle_.find(slot{std::this_thread::get_id(), key});
            if (it == idle_.end() || it->second.empty()) break;
            c = std::move(it->second.back());
            it->second.pop_back();
        }
        if (now - c.idle_since >= idle_ns) {
            (void)c.sock.close();
            continue;
        }
        // A connection idle for a while may have been closed by the upstream (its keep-alive
        // timeout): a look costs a system call, so only those are looked at, unless the
        // request cannot be sent again (a body, a method that is not idempotent). A busy one
        // that failed anyway is retried by the caller where that is safe; one the upstream
        // closed just after its last answer would fail such a request with a 502.
        if (check || now - c.idle_since > 1'000'000'000) {
            char probe;
            if (sys::recv(c.sock.get(), &probe, 1, MSG_PEEK | MSG_DONTWAIT) != -EAGAIN) {
                (void)c.sock.close();
                continue;
            }
        }
        c.reused = true;
        if (c.buf.use_count() > 1) c.buf.reset(new char[c.cap]);  // still being sent from
        return c;
    }
    upstream_conn c;
    c.sock = a.ip ? GLUON_TRY(net::stream::connect(*a.ip, o_.connect_timeout))
                  : GLUON_TRY(net::connect(a.host, a.port, o_.connect_timeout));
    (void)c.sock.set_nodelay(true);
    c.cap = o_.buffer_bytes > o_.limits.max_head_bytes + 1 ? o_.buffer_bytes : o_.limits.max_head_bytes + 1;
    c.buf.reset(new char[c.cap]);
    return c;
}

void upstream_pool::give_back(const std::string& key, upstream_conn c) {
    c.idle_since = mono_coarse_ns();
    c.reused = false;
    std::lock_guard g(lock_);
    auto& v = idle_[slot{std::this_thread::get_id(), key}];
    v.push_back(std::move(c));
    if (v.size() > o_.max_idle_per_upstream) {
        (void)v.front().sock.close();
        v.erase(v.begin());
    }
}

}  // namespace gluon::http::detail
