// Fetches a URL with gluon's HTTP client and prints the body (the status and fields with -i).
//
//   http_client [-i] [-X METHOD] [-H "Name: value"]... [-d BODY] [--proxy http://host:port] URL
//
// Redirects are followed (up to 5); HTTPS is verified against the system's CAs. The exit status
// is 0 for a 2xx answer, 1 otherwise.
#include <cstdio>
#include <cstring>
#include <string>

#include "gluon/http/client.h"
#include "gluon/runtime/vcpu.h"

using namespace gluon;

namespace {

int usage() {
    std::fprintf(stderr, "usage: http_client [-i] [-X METHOD] [-H \"Name: value\"]... [-d BODY] "
                         "[--proxy http://host:port] URL\n");
    return 2;
}

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
    for (int i = 1; i < argc; ++i) {
        const bool has_value = i + 1 < argc;
        if (!std::strcmp(argv[i], "-i")) {
            show_head = true;
        } else if (!std::strcmp(argv[i], "-X") && has_value) {
            auto m = parse_method(argv[++i]);
            if (!m) return usage();
            req.method = *m;
        } else if (!std::strcmp(argv[i], "-H") && has_value) {
            std::string h = argv[++i];
            size_t colon = h.find(':');
            if (colon == std::string::npos) return usage();
            size_t v = h.find_first_not_of(' ', colon + 1);
            req.headers.emplace_back(h.substr(0, colon), v == std::string::npos ? "" : h.substr(v));
        } else if (!std::strcmp(argv[i], "-d") && has_value) {
            req.body = argv[++i];
            if (req.method == http::method::get) req.method = http::method::post;
        } else if (!std::strcmp(argv[i], "--proxy") && has_value) {
            opts.proxy = argv[++i];
        } else if (argv[i][0] != '-' && req.url.empty()) {
            req.url = argv[i];
        } else {
            return usage();
        }
    }
    if (req.url.empty()) return usage();
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
