// Routes by method and path: exact paths ("/health"), parameters ("/users/:id"), and prefixes
// ("/static/*"). A path that no route matches is 404; one matched only under other methods is
// 405 with an Allow field. HEAD is served by a GET route when it has none of its own (the
// server sends the head only). "OPTIONS *", which asks about the server as a whole, is answered
// by the router after the middleware, never by a route: 200 with an Allow field listing every
// method some route accepts (and OPTIONS), and no content.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gluon/http/server.h"

namespace gluon::http {

class router {
public:
    /// Runs before routing; returning false ends the exchange (the middleware answered).
    using middleware = std::function<bool(request&, response&)>;

    router();
    ~router();
    router(router&&) noexcept;
    router& operator=(router&&) noexcept;

    /// Adds a route. A pattern starts with '/'; a segment ":name" matches one segment; a final
    /// "*" matches the rest of the path (param "*"). Exact routes win over parameter routes,
    /// which win over prefixes (the longest first). Errors: EINVAL (a malformed pattern),
    /// EEXIST (the same method and pattern twice).
    result<void> add(method m, std::string_view pattern, handler h);
    router& get(std::string_view pattern, handler h) { return checked(add(method::get, pattern, std::move(h))); }
    router& post(std::string_view pattern, handler h) { return checked(add(method::post, pattern, std::move(h))); }
    router& put(std::string_view pattern, handler h) { return checked(add(method::put, pattern, std::move(h))); }
    router& del(std::string_view pattern, handler h) { return checked(add(method::delete_, pattern, std::move(h))); }
    router& use(middleware m);

    /// Dispatches one request.
    void operator()(request& req, response& res) const;
    /// The router as a handler (shares its routes; add no routes after serving starts).
    handler as_handler() const;

private:
    router& checked(result<void> r);
    struct table;
    static void dispatch(const table& t, request& req, response& res);
    std::shared_ptr<table> t_;
};

}  // namespace gluon::http
