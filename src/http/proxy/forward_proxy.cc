// The forward proxy: absolute-form http:// requests relayed to their origin, and CONNECT tunnels
// spliced both ways on two fibers.
#include <algorithm>
#include <memory>

#include "gluon/http/client.h"
#include "gluon/http/proxy.h"
#include "gluon/net/resolver.h"
#include "gluon/runtime/fiber.h"
#include "relay.h"

namespace gluon::http {

namespace {

void refuse(response& res, int status, std::string_view why) {
    res.status(status);
    res.content_type("text/plain");
    res.body(why);
}

/// Both directions of a tunnel; either one failing ends the other.
struct tunnel {
    duration idle;
    deadline_t quiet_until = deadline_after(idle);  // idle since the last bytes either way
    bool failed = false;
    fiber dirs[2];

    void pump(net::byte_stream& from, net::byte_stream& to, int self) {
        char buf[16 * 1024];
        while (!failed) {
            // A read waits only for what is left of the idle time, since the other direction
            // may have moved meanwhile: given `idle` afresh after such a move, a direction
            // alone (the other half closed) kept a silent tunnel up to twice `idle`.
            const duration left = time_left(quiet_until);
            if (left == duration::zero()) break;
            auto n = from.read_some(buf, sizeof buf, left);
            if (!n && n.error() == std::errc::timed_out) continue;  // the other way may have moved
            if (!n) break;
            if (*n == 0) {  // a half close travels on; the other direction goes on
                (void)to.shutdown(idle);
                return;
            }
            if (!to.write_all(buf, *n, stall_timeout{idle})) break;  // idle: no progress for that long
            quiet_until = deadline_after(idle);
        }
        failed = true;
        (void)dirs[1 - self].interrupt();
    }
};

struct forward_state {
    forward_proxy_options o;
    detail::upstream_pool pool{o};

    explicit forward_state(forward_proxy_options opts) : o(std::move(opts)) {}

    bool allowed(std::string_view host, uint16_t port, bool tunnel) const {
        if (o.allow) return o.allow(host, port, tunnel);
        return !tunnel || std::find(o.connect_ports.begin(), o.connect_ports.end(), port) != o.connect_ports.end();
    }

    void open_tunnel(request& req, response& res) {
        auto a = detail::upstream_address::parse(req.target());
        if (!a) return refuse(res, 400, "CONNECT wants host:port\n");
        if (!allowed(a->host, a->port, true)) return refuse(res, 403, "tunnel refused\n");
        if (req.version_major() != 1) return refuse(res, 501, "CONNECT over HTTP/2 is not supported\n");
        auto up = a->ip ? net::stream::connect(*a->ip, o.connect_timeout)
                        : net::connect(a->host, a->port, o.connect_timeout);
        if (!up) {
            detail::log_failure(a->authority, up.error().value());
            return detail::answer_failure(res, up.error().value());
        }
        (void)up->set_nodelay(true);
        auto early = res.upgrade("HTTP/1.1 200 Connection Established\r\n\r\n");
        if (!early) return;
        // What the client sent after its request (a TLS ClientHello, often) goes first.
        if (!early->empty() && !up->write_all(early->data(), early->size(), stall_timeout{o.send_timeout})) return;
        net::byte_stream& client = req.stream();
        tunnel t{o.tunnel_idle_timeout};
        auto up_dir = spawn([&] { t.pump(client, *up, 0); });
        auto down_dir = spawn([&] { t.pump(*up, client, 1); });
        if (!up_dir || !down_dir) {
            t.failed = true;
            (void)client.close();
            (void)up->close();
        }
        if (up_dir) t.dirs[0] = std::move(*up_dir);
        if (down_dir) t.dirs[1] = std::move(*down_dir);
        // Both pumps use `t`: this frame must outlive them. A join that an interrupt ended (the
        // server is stopping) ends both directions and waits again.
        for (auto& f : t.dirs)
            while (f.joinable())
                if (!f.join()) {
                    t.failed = true;
                    for (auto& g : t.dirs) (void)g.interrupt();
                }
    }

    void serve(request& req, response& res) {
        if (req.method() == method::connect) return open_tunnel(req, res);
        std::string_view t = req.target();
        if (t.size() < 7 || !iequals(t.substr(0, 7), "http://")) return refuse(res, 400, "an http:// URL expected\n");
        auto u = url::parse(t);
        if (!u) return refuse(res, 400, "malformed URL\n");
        if (!allowed(u->host, u->port, false)) return refuse(res, 403, "forbidden\n");
        detail::upstream_address a;
        a.host = u->host;
        a.port = u->port;
        a.authority = (u->host.find(':') != std::string::npos ? "[" + u->host + "]" : u->host) + ":" +
                      std::to_string(u->port);
        if (auto ip = net::address::from_ip(a.host, a.port)) a.ip = *ip;
        if (detail::body_refused(req)) return;
        auto c = pool.take(a.authority, a, true);  // (no request is sent again here)
        if (!c) {
            detail::log_failure(a.authority, c.error().value());
            return detail::answer_failure(res, c.error().value());
        }
        std::string host = u->authority();
        auto r = detail::relay(*c, req, res, {u->target, host}, o);
        if (r.keep && r.end == detail::relay_outcome::done) pool.give_back(a.authority, std::move(*c));
        else (void)c->sock.close();
        if (r.end == detail::relay_outcome::upstream_failed) {
            detail::log_failure(a.authority, r.error);
            if (!r.answered) detail::answer_failure(res, r.error);
        }
    }
};

}  // namespace

handler forward_proxy(forward_proxy_options opts) {
    auto st = std::make_shared<forward_state>(std::move(opts));
    return [st](request& req, response& res) { st->serve(req, res); };
}

}  // namespace gluon::http
