#include "gluon/http/router.h"

#include <algorithm>
#include <initializer_list>
#include <string>

#include "gluon/common/misuse.h"

namespace gluon::http {

namespace {

struct route {
    method verb;
    std::string pattern;
    std::vector<std::string> segments;  // for parameter routes; ":name" segments match any one
    std::string prefix;                 // for prefix routes: the pattern without its "*"
    handler h;
};

bool method_matches(method route_verb, method req) { return route_verb == req || (req == method::head && route_verb == method::get); }

/// Matches a parameter route against a path; fills params on success.
bool match_segments(const route& r, std::string_view path,
                    std::vector<std::pair<std::string_view, std::string_view>>& params) {
    size_t i = 1;  // past the leading '/'
    size_t base = params.size();
    for (const std::string& seg : r.segments) {
        if (i > path.size()) return params.resize(base), false;
        size_t e = path.find('/', i);
        if (e == std::string_view::npos) e = path.size();
        std::string_view part = path.substr(i, e - i);
        if (seg[0] == ':') {
            if (part.empty()) return params.resize(base), false;
            params.emplace_back(std::string_view(seg).substr(1), part);
        } else if (part != seg) {
            return params.resize(base), false;
        }
        i = e + 1;
    }
    if (i <= path.size()) return params.resize(base), false;  // the path has more segments
    return true;
}

/// Every method some route accepts, and HEAD with GET: the Allow of an "OPTIONS *" answer.
std::string all_methods(std::initializer_list<const std::vector<route>*> tables) {
    bool used[static_cast<size_t>(method::other) + 1] = {};
    for (const std::vector<route>* t : tables)
        for (const route& r : *t) used[static_cast<size_t>(r.verb)] = true;
    used[static_cast<size_t>(method::head)] |= used[static_cast<size_t>(method::get)];
    used[static_cast<size_t>(method::options)] = true;  // the "OPTIONS *" being answered
    std::string allow;
    for (size_t m = 0; m < static_cast<size_t>(method::other); ++m) {
        if (!used[m]) continue;
        if (!allow.empty()) allow += ", ";
        allow += method_name(static_cast<method>(m));
    }
    return allow;
}

}  // namespace

struct router::table {
    std::vector<middleware> middlewares;
    std::vector<route> exact, params, prefixes;
};

router::router() : t_(std::make_shared<table>()) {}
router::~router() = default;
router::router(router&&) noexcept = default;
router& router::operator=(router&&) noexcept = default;

router& router::checked(result<void> r) {
    if (!r) gluon::detail::report_misuse("http::router: invalid or duplicate route pattern");
    return *this;
}

router& router::use(middleware m) {
    t_->middlewares.push_back(std::move(m));
    return *this;
}

result<void> router::add(method m, std::string_view pattern, handler h) {
    if (pattern.empty() || pattern[0] != '/' || !h) return errno_error(EINVAL);
    route r{m, std::string(pattern), {}, {}, std::move(h)};
    std::vector<route>* into = &t_->exact;
    if (pattern.back() == '*') {
        r.prefix = std::string(pattern.substr(0, pattern.size() - 1));
        if (r.prefix.find('*') != std::string::npos || r.prefix.find(':') != std::string::npos) return errno_error(EINVAL);
        into = &t_->prefixes;
    } else if (pattern.find(':') != std::string_view::npos) {
        size_t i = 1;
        while (i <= pattern.size()) {
            size_t e = pattern.find('/', i);
            if (e == std::string_view::npos) e = pattern.size();
            std::string_view seg = pattern.substr(i, e - i);
            if (seg.empty() || seg == ":" || seg.find('*') != std::string_view::npos) return errno_error(EINVAL);
            r.segments.emplace_back(seg);
            i = e + 1;
        }
        into = &t_->params;
    } else if (pattern.find('*') != std::string_view::npos) {
        return errno_error(EINVAL);
    }
    for (const route& o : *into)
        if (o.verb == m && o.pattern == r.pattern) return errno_error(EEXIST);
    into->push_back(std::move(r));
    if (into == &t_->prefixes)
        std::stable_sort(t_->prefixes.begin(), t_->prefixes.end(),
                         [](const route& a, const route& b) { return a.prefix.size() > b.prefix.size(); });
    return {};
}

void router::operator()(request& req, response& res) const { dispatch(*t_, req, res); }

void router::dispatch(const table& t, request& req, response& res) {
    for (const middleware& m : t.middlewares)
        if (!m(req, res)) return;
    std::string_view path = req.path();
    method verb = req.method();
    if (verb == method::options && path == "*") {
        // About the server as a whole (RFC 9110 9.3.7), not a resource: no route's pattern can
        // be "*". No content: the server sends Content-Length: 0, as 9.3.7 asks.
        res.status(200);
        res.header("Allow", all_methods({&t.exact, &t.params, &t.prefixes}));
        return;
    }
    std::string allow;
    auto note_allowed = [&](method m) {
        std::string_view n = method_name(m);
        if (allow.find(n) != std::string::npos) return;
        if (!allow.empty()) allow += ", ";
        allow += n;
        if (m == method::get && allow.find("HEAD") == std::string::npos) allow += ", HEAD";
    };
    // A route for this exact method wins over a GET route answering HEAD.
    const route* fallback = nullptr;
    for (const route& r : t.exact) {
        if (r.pattern != path) continue;
        if (r.verb == verb) return r.h(req, res);
        if (method_matches(r.verb, verb) && !fallback) fallback = &r;
        note_allowed(r.verb);
    }
    if (fallback) return fallback->h(req, res);
    for (const route& r : t.params) {
        if (!match_segments(r, path, req.params_)) continue;
        if (method_matches(r.verb, verb)) return r.h(req, res);
        req.params_.clear();
        note_allowed(r.verb);
    }
    for (const route& r : t.prefixes) {
        if (path.substr(0, r.prefix.size()) != r.prefix) continue;
        if (method_matches(r.verb, verb)) {
            req.params_.emplace_back("*", path.substr(r.prefix.size()));
            return r.h(req, res);
        }
        note_allowed(r.verb);
    }
    if (!allow.empty()) {
        res.status(405);
        res.header("Allow", allow);
        res.content_type("text/plain");
        res.body("405 Method Not Allowed\n");
        return;
    }
    res.status(404);
    res.content_type("text/plain");
    res.body("404 Not Found\n");
}

handler router::as_handler() const {
    return [t = t_](request& req, response& res) { dispatch(*t, req, res); };
}

}  // namespace gluon::http
