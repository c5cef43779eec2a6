// The reverse proxy: an upstream chosen per request, a pooled connection to it, and a new attempt
// on the next upstream when that is safe.
#include <atomic>
#include <memory>

#include "gluon/common/log.h"
#include "gluon/http/proxy.h"
#include "relay.h"

namespace gluon::http {

namespace {

bool idempotent(method m) {
    return m == method::get || m == method::head || m == method::put || m == method::delete_ ||
           m == method::options || m == method::trace;
}

struct reverse_state {
    proxy_options o;
    std::vector<detail::upstream_address> ups;
    std::unique_ptr<std::atomic<uint32_t>[]> busy;  // exchanges in flight, per upstream
    std::atomic<uint64_t> next{0};
    detail::upstream_pool pool{o};

    explicit reverse_state(proxy_options opts) : o(std::move(opts)) {
        for (const auto& u : o.upstreams) {
            auto a = detail::upstream_address::parse(u);
            if (a) ups.push_back(std::move(*a));
            else GLUON_WARN("gluon: proxy: upstream \"{}\" is not host:port; left out", u);
        }
        busy.reset(new std::atomic<uint32_t>[ups.size() ? ups.size() : 1]());
    }

    size_t pick() {
        size_t start = next.fetch_add(1, std::memory_order_relaxed) % ups.size();
        if (o.balancing != proxy_options::balance::least_busy) return start;
        size_t best = start;
        for (size_t k = 1; k < ups.size(); ++k) {
            size_t i = (start + k) % ups.size();
            if (busy[i].load(std::memory_order_relaxed) < busy[best].load(std::memory_order_relaxed)) best = i;
        }
        return best;
    }

    void serve(request& req, response& res) {
        if (req.method() == method::connect) {
            // A tunnel is forward_proxy's. Relayed, an upstream's 2xx would turn its
            // connection into a tunnel to the client's target, and the pool would hand that
            // to the next request, whoever sent it.
            res.status(501);
            res.content_type("text/plain");
            res.body("CONNECT is not supported by this proxy\n");
            return;
        }
        if (detail::body_refused(req)) return;
        if (ups.empty()) return detail::answer_failure(res, ECONNREFUSED);
        // An HTTP/1.1 client may send absolute-form to a reverse proxy too (RFC 9112 3.2.2).
        std::string origin_form;
        std::string_view target = req.target();
        if (!target.empty() && target[0] != '/' && target != "*") {
            origin_form.assign(req.raw_path());
            if (!req.query().empty()) origin_form.append("?").append(req.query());
            target = origin_form;
        }
        const bool may_repeat = idempotent(req.method()) && !req.has_body();
        const int attempts = 1 + (o.retries > 0 ? o.retries : 0);
        size_t i = pick();
        int error = 0;
        for (int a = 0; a < attempts; ++a, i = (i + 1) % ups.size()) {
            const detail::upstream_address& up = ups[i];
            busy[i].fetch_add(1, std::memory_order_relaxed);
            struct release {
                std::atomic<uint32_t>& n;
                ~release() { n.fetch_sub(1, std::memory_order_relaxed); }
            } in_flight{busy[i]};
            auto c = pool.take(up.authority, up, !may_repeat);
            if (!c) {  // nothing was sent: any request may go to the next upstream
                error = c.error().value();
                detail::log_failure(up.authority, error);
                if (error == ECANCELED) break;
                continue;
            }
            detail::request_line line{target, o.preserve_host && !req.host().empty() ? req.host()
                                                                                        : std::string_view(up.authority)};
            auto r = detail::relay(*c, req, res, line, o);
            if (r.keep && r.end == detail::relay_outcome::done) pool.give_back(up.authority, std::move(*c));
            else (void)c->sock.close();
            if (r.end != detail::relay_outcome::upstream_failed) return;
            error = r.error;
            detail::log_failure(up.authority, error);
            if (r.answered) return;
            // (A kept-alive connection the upstream had closed is one such case.) A timeout is
            // not: the upstream may still be working on the request, and another attempt would
            // have the client wait up to (1 + retries) x read_timeout for its 504, and load a
            // second upstream with the request that made the first one slow.
            if (!(r.retryable && may_repeat) || error == ECANCELED || error == ETIMEDOUT) break;
        }
        detail::answer_failure(res, error);
    }
};

}  // namespace

handler reverse_proxy(proxy_options opts) {
    auto st = std::make_shared<reverse_state>(std::move(opts));
    return [st](request& req, response& res) { st->serve(req, res); };
}

}  // namespace gluon::http
