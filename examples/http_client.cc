// Fetches a URL with gluon's HTTP client and prints the body (the status and fields with -i).
//
//   http_client [-i] [-X METHOD] [-H "Name: value"]... [-d BODY] [--proxy http://host:port] URL
//
// Redirects are followed (up to 5); HTTPS is verified against the system's CAs. The exit status
// is 0 for a 2xx answer, 1 otherwise.
#include <cstdio>
#include <string>
#include <vector>

#include "gluon/http/client.h"
#include "gluon/runtime/cli.h"
#include "gluon/runtime/vcpu.h"

using namespace gluon;

namespace {

std::optional<http::method> parse_method(std::string_view m) {
    for (auto k : {http::method::get, http::method::head, http::method::post, http::method::put,
                   http::method::delete_, http::method::options, http::method::patch})
        if (http::method_name(k) == m) return k;
    return std::nullopt;
}

}  // namespace

int main(int argc, char** argv) {
    http::client_request req;
    http::client_options opts;
    bool show_head = false;
    std::vector<std::string> urls;
    cli::parser p("usage: http_client [-i] [-X METHOD] [-H \"Name: value\"]... [-d BODY] [--proxy http://host:port] URL");
    p.flag("-i", show_head).option("--proxy", opts.proxy).positional(urls);
    p.option("-X", [&](std::string_view v) {
        auto m = parse_method(v);
        if (m) req.method = *m;
        return m.has_value();
    });
    p.option("-H", [&](std::string_view h) {
        size_t colon = h.find(':');
        if (colon == std::string_view::npos) return false;
        size_t v = h.find_first_not_of(' ', colon + 1);
        req.headers.emplace_back(std::string(h.substr(0, colon)), v == std::string_view::npos ? "" : std::string(h.substr(v)));
        return true;
    });
    p.option("-d", [&](std::string_view body) {
        req.body = body;
        if (req.method == http::method::get) req.method = http::method::post;
        return true;
    });
    if (!p.parse(argc, argv) || urls.size() != 1) return p.usage();
    req.url = urls[0];
    auto r = run({}, [&]() -> result<http::client_response> {
        http::client c(opts);
        return c.send(req);
    });
    if (!r) {
        std::fprintf(stderr, "http_client: %s: %s\n", req.url.c_str(), r.error().message().c_str());
        return 1;
    }
    if (show_head) {
        std::printf("HTTP/1.1 %d %s\n", r->status, r->reason.c_str());
        for (const auto& [k, v] : r->headers) std::printf("%s: %s\n", k.c_str(), v.c_str());
        std::printf("\n");
    }
    std::fwrite(r->body.data(), 1, r->body.size(), stdout);
    return r->status >= 200 && r->status < 300 ? 0 : 1;
}
